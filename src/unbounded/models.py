"""The model catalogue moved to `unbounded.catalog` (the name read too close to the `model`
package); this module keeps the old import path working. `Provider` is the old name of
`catalog.ProviderName`."""

from unbounded.catalog import (
    DEFAULT_MODEL,
    MODELS_FILE_ENV,
    ModelInfo,
    ModelTable,
    ProviderName,
    load_model_table,
    read_model_file,
)

Provider = ProviderName
"""The old name of `unbounded.catalog.ProviderName`."""

__all__ = [
    "DEFAULT_MODEL",
    "MODELS_FILE_ENV",
    "ModelInfo",
    "ModelTable",
    "Provider",
    "ProviderName",
    "load_model_table",
    "read_model_file",
]

-- unbounded session store, schema version 1.
-- Applied by unbounded.postgres.migrations (`unbounded migrate URL`), which records it in
-- unbounded_schema_migrations. Tables live in the connection's current schema (search_path).

CREATE TABLE unbounded_sessions (
    session_id  text PRIMARY KEY CHECK (length(session_id) BETWEEN 1 AND 512),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    records     bigint NOT NULL DEFAULT 0,   -- rows in unbounded_records for this session
    bytes       bigint NOT NULL DEFAULT 0    -- size of the session as a JSONL file
);

-- The append-only transcript: one row per record, numbered from 1 in append order.
-- `line` is the record's exact JSON Lines text (no newline): what load() and export return,
-- byte for byte. `record` is the same record as jsonb for queries; jsonb reorders keys and
-- cannot hold the \u0000 escape, so it is NULL for the rare record that has one.
CREATE TABLE unbounded_records (
    session_id  text NOT NULL REFERENCES unbounded_sessions (session_id) ON DELETE CASCADE,
    seq         bigint NOT NULL CHECK (seq >= 1),
    line        text NOT NULL,
    record      jsonb,
    PRIMARY KEY (session_id, seq)
);

-- Pipeline state documents (microcompaction, circuit breaker, TTL latch...), replaced whole.
CREATE TABLE unbounded_states (
    session_id  text NOT NULL REFERENCES unbounded_sessions (session_id) ON DELETE CASCADE,
    name        text NOT NULL,
    data        jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, name)
);

-- The session notes (session memory).
CREATE TABLE unbounded_notes (
    session_id  text PRIMARY KEY REFERENCES unbounded_sessions (session_id) ON DELETE CASCADE,
    body        text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Tool outputs too large to send whole, kept on the side (UTF-8 bytes: outputs may hold NUL).
CREATE TABLE unbounded_tool_outputs (
    session_id  text NOT NULL REFERENCES unbounded_sessions (session_id) ON DELETE CASCADE,
    key         text NOT NULL,
    body        bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, key)
);

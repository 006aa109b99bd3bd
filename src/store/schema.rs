//! The schema of the state database: an append-only list of migrations,
//! counted in `PRAGMA user_version`. Runs as root inside the host helper,
//! which applies it when it opens the store (`Store::open`); this file holds
//! only the SQL.
//!
//! Invariants:
//! - a shipped step is never edited, only followed by a new one, so every
//!   database that exists can be brought to the current version;
//! - states are guarded by CHECK constraints, so no bug can store a state
//!   that is not in the list; each CHECK list is exactly the name table of
//!   its enum in `rows.rs` (the tests read them back from a migrated
//!   database and compare, so a variant without a migration fails).

/// The schema, one step per entry. Append only: never edit a shipped step.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: plans, apps, audit.
    "CREATE TABLE plans (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE CHECK (length(id) = 32),
        action TEXT NOT NULL CHECK (action IN ('deploy', 'nginx_config', 'stop', 'remove_image')),
        body TEXT NOT NULL,
        digest TEXT NOT NULL CHECK (length(digest) = 64),
        requires_approval INTEGER NOT NULL CHECK (requires_approval IN (0, 1)),
        requester TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending'
            CHECK (state IN ('pending', 'executing', 'completed', 'needs_inspection', 'invalidated')),
        approved_by TEXT,
        approved_at INTEGER,
        approved_digest TEXT,
        claim_pid INTEGER,
        claim_start INTEGER,
        claim_boot TEXT,
        claimed_at INTEGER,
        finished_at INTEGER,
        outcome TEXT CHECK (outcome IS NULL OR outcome IN
            ('completed', 'engine_failed', 'claimer_died', 'record_failed', 'policy_changed', 'snapshot_changed')),
        CHECK ((approved_by IS NULL) = (approved_at IS NULL) AND (approved_by IS NULL) = (approved_digest IS NULL)),
        CHECK (approved_by IS NULL OR requires_approval = 1),
        CHECK (state = 'pending' OR state = 'invalidated' OR claimed_at IS NOT NULL),
        CHECK ((state IN ('pending', 'executing')) = (finished_at IS NULL))
    );
    -- The gate 'no new plan while one is executing or needs inspection' reads
    -- only this small partial index, however long the history grows.
    CREATE INDEX plans_unsettled ON plans (state) WHERE state IN ('executing', 'needs_inspection');
    CREATE TABLE apps (
        name TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 31),
        state TEXT NOT NULL CHECK (state IN ('running', 'stopped', 'needs_inspection')),
        host_port INTEGER NOT NULL UNIQUE CHECK (host_port BETWEEN 1024 AND 65535),
        record TEXT NOT NULL,
        plan_id TEXT NOT NULL REFERENCES plans (id),
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE audit (
        seq INTEGER PRIMARY KEY,
        at INTEGER NOT NULL,
        event TEXT NOT NULL CHECK (event IN
            ('prepared', 'approved', 'claimed', 'completed', 'needs_inspection', 'claim_abandoned', 'invalidated')),
        plan_id TEXT NOT NULL REFERENCES plans (id),
        action TEXT NOT NULL CHECK (action IN ('deploy', 'nginx_config', 'stop', 'remove_image')),
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'uncertain', 'refused')),
        exit_code INTEGER,
        duration_ms INTEGER,
        actor TEXT NOT NULL
    );
    CREATE INDEX audit_plan ON audit (plan_id);",
    // 2: two terminal states. `inspected`: an operator resolved a plan that
    // needed inspection (who and when in resolved_by/resolved_at). `failed`:
    // the engine failed but provably left the server as it was (outcome
    // `rolled_back` or `not_started`), so nothing blocks the host. SQLite
    // cannot alter a CHECK constraint, so plans and audit are rebuilt
    // (create new, copy, drop, rename, recreate indexes); `migrate` runs this
    // with foreign keys off and checks them before committing, as SQLite's
    // documented procedure for schema changes says.
    "CREATE TABLE plans_v2 (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE CHECK (length(id) = 32),
        action TEXT NOT NULL CHECK (action IN ('deploy', 'nginx_config', 'stop', 'remove_image')),
        body TEXT NOT NULL,
        digest TEXT NOT NULL CHECK (length(digest) = 64),
        requires_approval INTEGER NOT NULL CHECK (requires_approval IN (0, 1)),
        requester TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending'
            CHECK (state IN ('pending', 'executing', 'completed', 'needs_inspection', 'invalidated',
                             'inspected', 'failed')),
        approved_by TEXT,
        approved_at INTEGER,
        approved_digest TEXT,
        claim_pid INTEGER,
        claim_start INTEGER,
        claim_boot TEXT,
        claimed_at INTEGER,
        finished_at INTEGER,
        outcome TEXT CHECK (outcome IS NULL OR outcome IN
            ('completed', 'engine_failed', 'claimer_died', 'record_failed', 'policy_changed', 'snapshot_changed',
             'rolled_back', 'not_started')),
        resolved_by TEXT,
        resolved_at INTEGER,
        CHECK ((approved_by IS NULL) = (approved_at IS NULL) AND (approved_by IS NULL) = (approved_digest IS NULL)),
        CHECK (approved_by IS NULL OR requires_approval = 1),
        CHECK (state = 'pending' OR state = 'invalidated' OR claimed_at IS NOT NULL),
        CHECK ((state IN ('pending', 'executing')) = (finished_at IS NULL)),
        CHECK ((resolved_by IS NULL) = (resolved_at IS NULL)),
        CHECK ((state = 'inspected') = (resolved_by IS NOT NULL)),
        CHECK (state <> 'failed' OR outcome IN ('rolled_back', 'not_started'))
    );
    INSERT INTO plans_v2 (seq, id, action, body, digest, requires_approval, requester, created_at, expires_at,
        state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at,
        finished_at, outcome)
    SELECT seq, id, action, body, digest, requires_approval, requester, created_at, expires_at,
        state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at,
        finished_at, outcome FROM plans;
    DROP TABLE plans;
    ALTER TABLE plans_v2 RENAME TO plans;
    -- Exactly as in step 1: the new-plan gate reads only this partial index.
    CREATE INDEX plans_unsettled ON plans (state) WHERE state IN ('executing', 'needs_inspection');
    CREATE TABLE audit_v2 (
        seq INTEGER PRIMARY KEY,
        at INTEGER NOT NULL,
        event TEXT NOT NULL CHECK (event IN
            ('prepared', 'approved', 'claimed', 'completed', 'needs_inspection', 'claim_abandoned', 'invalidated',
             'inspected', 'failed')),
        plan_id TEXT NOT NULL REFERENCES plans (id),
        action TEXT NOT NULL CHECK (action IN ('deploy', 'nginx_config', 'stop', 'remove_image')),
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'uncertain', 'refused')),
        exit_code INTEGER,
        duration_ms INTEGER,
        actor TEXT NOT NULL
    );
    INSERT INTO audit_v2 (seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor)
    SELECT seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor FROM audit;
    DROP TABLE audit;
    ALTER TABLE audit_v2 RENAME TO audit;
    CREATE INDEX audit_plan ON audit (plan_id);",
];

/// The schema version this code writes: the number of migrations.
pub(super) fn supported_version() -> i64 {
    MIGRATIONS.len() as i64
}

CREATE TABLE plans (
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
    CREATE INDEX audit_plan ON audit (plan_id);
-- Schema step 17, `MIGRATIONS[16]` in schema.rs: the comment there says why.
CREATE TABLE audit_v17 (
    seq INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    event TEXT NOT NULL CHECK (event IN
        ('prepared', 'approved', 'claimed', 'completed', 'needs_inspection', 'claim_abandoned', 'invalidated',
         'inspected', 'failed', 'rejected', 'request', 'pruned')),
    plan_id TEXT CHECK (plan_id IS NULL OR length(plan_id) = 32),
    action TEXT CHECK (action IS NULL OR (length(action) BETWEEN 1 AND 31 AND action NOT GLOB '*[^a-z_]*')),
    outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'uncertain', 'refused')),
    exit_code INTEGER,
    duration_ms INTEGER,
    actor TEXT NOT NULL,
    operation TEXT CHECK (operation IS NULL OR
        (length(operation) BETWEEN 1 AND 31 AND operation NOT GLOB '*[^a-z_]*')),
    app TEXT CHECK (app IS NULL OR length(app) BETWEEN 1 AND 31),
    code TEXT CHECK (code IS NULL OR length(code) BETWEEN 1 AND 64),
    process TEXT CHECK (process IS NULL OR process IN
        ('COMMAND_EXIT_NONZERO', 'COMMAND_TIMEOUT', 'COMMAND_OUTPUT_LIMIT', 'COMMAND_SIGNALED',
         'COMMAND_LAUNCH_FAILED', 'SSH_OR_REMOTE_EXIT_255')),
    request_id TEXT CHECK (request_id IS NULL OR length(request_id) BETWEEN 1 AND 64),
    count INTEGER CHECK (count IS NULL OR count >= 1),
    sudo_uid INTEGER,
    login_uid INTEGER,
    prev_hash TEXT CHECK (prev_hash IS NULL OR length(prev_hash) = 64),
    hash TEXT CHECK (hash IS NULL OR length(hash) = 64),
    gate_reason TEXT CHECK (gate_reason IS NULL OR gate_reason IN
        ('no_command', 'too_long', 'not_a_fixed_request')),
    command_bytes INTEGER CHECK (command_bytes IS NULL OR command_bytes >= 0),
    command_sha256 TEXT CHECK (command_sha256 IS NULL OR length(command_sha256) = 64),
    anchor_seq INTEGER CHECK (anchor_seq IS NULL OR anchor_seq >= 1),
    anchor_hash TEXT CHECK (anchor_hash IS NULL OR length(anchor_hash) = 64),
    command_digests TEXT CHECK (command_digests IS NULL OR
        (json_valid(command_digests) AND json_type(command_digests) = 'array'
         AND json_array_length(command_digests) BETWEEN 1 AND 16)),
    commands_beyond INTEGER CHECK (commands_beyond IS NULL OR commands_beyond >= 1),
    signer_key TEXT CHECK (signer_key IS NULL OR
        (length(signer_key) BETWEEN 8 AND 120 AND signer_key GLOB 'SHA256:*')),
    statement_sha256 TEXT CHECK (statement_sha256 IS NULL OR
        (length(statement_sha256) = 64 AND statement_sha256 NOT GLOB '*[^0-9a-f]*'))
);
INSERT INTO audit_v17 (seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, operation,
    app, code, process, request_id, count, sudo_uid, login_uid, prev_hash, hash, gate_reason,
    command_bytes, command_sha256, anchor_seq, anchor_hash, command_digests, commands_beyond)
SELECT seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, operation,
    app, code, process, request_id, count, sudo_uid, login_uid, prev_hash, hash, gate_reason,
    command_bytes, command_sha256, anchor_seq, anchor_hash, command_digests, commands_beyond FROM audit;
DROP TABLE audit;
ALTER TABLE audit_v17 RENAME TO audit;
CREATE INDEX audit_plan ON audit (plan_id);
CREATE INDEX audit_at ON audit (at);

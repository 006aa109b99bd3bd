-- Schema step 15, `MIGRATIONS[14]` in schema.rs: the comment there says why.
CREATE TABLE plans_v15 (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE CHECK (length(id) = 32),
    action TEXT NOT NULL CHECK (length(action) BETWEEN 1 AND 31 AND action NOT GLOB '*[^a-z_]*'),
    body TEXT NOT NULL,
    digest TEXT NOT NULL CHECK (length(digest) = 64),
    requires_approval INTEGER NOT NULL CHECK (requires_approval IN (0, 1)),
    requester TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'executing', 'completed', 'needs_inspection', 'invalidated',
                         'inspected', 'failed', 'rejected')),
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
    rejected_by TEXT,
    rejected_at INTEGER,
    created_boot TEXT,
    created_boottime_ms INTEGER CHECK (created_boottime_ms IS NULL OR created_boottime_ms >= 0),
    failure_code TEXT CHECK (failure_code IS NULL OR length(failure_code) BETWEEN 1 AND 64),
    failure_message TEXT CHECK (failure_message IS NULL OR length(failure_message) BETWEEN 1 AND 2000),
    rejected_reason TEXT CHECK (rejected_reason IS NULL OR
        (length(rejected_reason) BETWEEN 1 AND 500 AND rejected_by IS NOT NULL)),
    alerted INTEGER CHECK (alerted IS NULL OR alerted IN (0, 1)),
    app_log TEXT CHECK (app_log IS NULL OR (length(app_log) BETWEEN 2 AND 16384 AND json_valid(app_log))),
    CHECK ((approved_by IS NULL) = (approved_at IS NULL) AND (approved_by IS NULL) = (approved_digest IS NULL)),
    CHECK (approved_by IS NULL OR requires_approval = 1),
    CHECK (state IN ('pending', 'invalidated', 'rejected') OR claimed_at IS NOT NULL),
    CHECK ((state IN ('pending', 'executing')) = (finished_at IS NULL)),
    CHECK ((resolved_by IS NULL) = (resolved_at IS NULL)),
    CHECK ((state = 'inspected') = (resolved_by IS NOT NULL)),
    CHECK (state <> 'failed' OR outcome IN ('rolled_back', 'not_started')),
    CHECK ((rejected_by IS NULL) = (rejected_at IS NULL)),
    CHECK ((state = 'rejected') = (rejected_by IS NOT NULL)),
    CHECK (state <> 'rejected' OR (claimed_at IS NULL AND outcome IS NULL))
);
INSERT INTO plans_v15 (seq, id, action, body, digest, requires_approval, requester, created_at, expires_at,
    state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at,
    finished_at, outcome, resolved_by, resolved_at, rejected_by, rejected_at, created_boot,
    created_boottime_ms, failure_code, failure_message, rejected_reason, alerted, app_log)
SELECT seq, id, action, body, digest, requires_approval, requester, created_at, expires_at,
    state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at,
    finished_at, outcome, resolved_by, resolved_at, rejected_by, rejected_at, created_boot,
    created_boottime_ms, failure_code, failure_message, rejected_reason, alerted, app_log FROM plans;
DROP TABLE plans;
ALTER TABLE plans_v15 RENAME TO plans;
CREATE INDEX plans_unsettled ON plans (state) WHERE state IN ('executing', 'needs_inspection');
CREATE INDEX plans_pending ON plans (expires_at) WHERE state = 'pending';
CREATE INDEX plans_finished ON plans (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX plans_pending_requester ON plans (requester, expires_at) WHERE state = 'pending';
CREATE TABLE audit_v15 (
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
    operation TEXT CHECK (operation IS NULL OR operation IN
        ('rpc', 'gateway_status', 'inventory', 'plan', 'execute', 'logs', 'show', 'list', 'approve', 'reject',
         'resolve', 'doctor', 'retention', 'audit_prune', 'ssh_gate')),
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
    anchor_hash TEXT CHECK (anchor_hash IS NULL OR length(anchor_hash) = 64)
);
INSERT INTO audit_v15 (seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, operation,
    app, code, process, request_id, count, sudo_uid, login_uid, prev_hash, hash, gate_reason,
    command_bytes, command_sha256, anchor_seq, anchor_hash)
SELECT seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, operation,
    app, code, process, request_id, count, sudo_uid, login_uid, prev_hash, hash, gate_reason,
    command_bytes, command_sha256, anchor_seq, anchor_hash FROM audit;
DROP TABLE audit;
ALTER TABLE audit_v15 RENAME TO audit;
CREATE INDEX audit_plan ON audit (plan_id);
CREATE INDEX audit_at ON audit (at);

//! The schema of the state database: an append-only list of migrations,
//! counted in `PRAGMA user_version`. Runs as root inside the host helper,
//! which applies it when it opens the store (`Store::open`); this file holds
//! only the SQL (step 4's hashes are computed in `chain.rs`).
//!
//! Invariants:
//! - a shipped step is never edited, only followed by a new one, so every
//!   database that exists can be brought to the current version;
//! - states are guarded by CHECK constraints, so no bug can store a state
//!   that is not in the list; each CHECK list is exactly the name table of
//!   its enum (`rows.rs`, `crate::vocab`; the tests read them back from a
//!   migrated database and compare, so a variant without a migration
//!   fails). Action names are the exception since step 15: a set that
//!   grows with each action, checked for their shape only.

/// The schema, one step per entry. Append only: never edit a shipped step.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: plans, apps, audit: schema/v1.sql, the text as it shipped.
    include_str!("schema/v1.sql"),
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
    // 3: a third terminal state, `rejected`: the operator ended a pending plan
    // with `volce-lab-host reject` (who and when in rejected_by/rejected_at,
    // finished_at the same moment; it was never claimed), and the action
    // `remove_app` in both action CHECK lists. Rebuilt exactly as step 2
    // did, for the same reason (a CHECK cannot be altered), plus a partial
    // index for the operator's `list` of unexpired pending plans.
    "CREATE TABLE plans_v3 (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE CHECK (length(id) = 32),
        action TEXT NOT NULL CHECK (action IN ('deploy', 'nginx_config', 'stop', 'remove_image', 'remove_app')),
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
    INSERT INTO plans_v3 (seq, id, action, body, digest, requires_approval, requester, created_at, expires_at,
        state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at,
        finished_at, outcome, resolved_by, resolved_at)
    SELECT seq, id, action, body, digest, requires_approval, requester, created_at, expires_at,
        state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at,
        finished_at, outcome, resolved_by, resolved_at FROM plans;
    DROP TABLE plans;
    ALTER TABLE plans_v3 RENAME TO plans;
    -- Exactly as in step 1: the new-plan gate reads only this partial index.
    CREATE INDEX plans_unsettled ON plans (state) WHERE state IN ('executing', 'needs_inspection');
    -- The operator's list: pending plans by expiry, so expired ones (which
    -- stay pending for good) cost nothing to skip.
    CREATE INDEX plans_pending ON plans (expires_at) WHERE state = 'pending';
    CREATE TABLE audit_v3 (
        seq INTEGER PRIMARY KEY,
        at INTEGER NOT NULL,
        event TEXT NOT NULL CHECK (event IN
            ('prepared', 'approved', 'claimed', 'completed', 'needs_inspection', 'claim_abandoned', 'invalidated',
             'inspected', 'failed', 'rejected')),
        plan_id TEXT NOT NULL REFERENCES plans (id),
        action TEXT NOT NULL CHECK (action IN ('deploy', 'nginx_config', 'stop', 'remove_image', 'remove_app')),
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'uncertain', 'refused')),
        exit_code INTEGER,
        duration_ms INTEGER,
        actor TEXT NOT NULL
    );
    INSERT INTO audit_v3 (seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor)
    SELECT seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor FROM audit;
    DROP TABLE audit;
    ALTER TABLE audit_v3 RENAME TO audit;
    CREATE INDEX audit_plan ON audit (plan_id);",
    // 4: the audit trail's hash chain (`chain.rs`): each row's `hash` is
    // sha256 over its `prev_hash` and its canonical content. This SQL adds
    // the two columns; `migrate` then fills them for the rows that exist,
    // oldest first, in the same transaction ([`CHAIN_STEP`]). The columns
    // allow NULL only because SQLite cannot add a NOT NULL column without a
    // default to a table with rows: every row the code writes has both, and
    // `audit verify` reports a row without them.
    "ALTER TABLE audit ADD COLUMN prev_hash TEXT CHECK (prev_hash IS NULL OR length(prev_hash) = 64);
    ALTER TABLE audit ADD COLUMN hash TEXT CHECK (hash IS NULL OR length(hash) = 64);",
    // 5: the actions `start` and `update` in both action CHECK lists, and
    // `image_claims`: the image ids of removed apps (`claims.rs`).
    // Rebuilt as steps 2 and 3 did (a CHECK cannot be altered), every column
    // copied as it is: the audit rows keep their `prev_hash` and `hash` from
    // step 4, and since an action string is copied byte for byte, every
    // link of the chain still verifies.
    "CREATE TABLE plans_v5 (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE CHECK (length(id) = 32),
        action TEXT NOT NULL CHECK (action IN
            ('deploy', 'nginx_config', 'stop', 'remove_image', 'remove_app', 'start', 'update')),
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
    INSERT INTO plans_v5 SELECT seq, id, action, body, digest, requires_approval, requester, created_at,
        expires_at, state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot,
        claimed_at, finished_at, outcome, resolved_by, resolved_at, rejected_by, rejected_at FROM plans;
    DROP TABLE plans;
    ALTER TABLE plans_v5 RENAME TO plans;
    CREATE INDEX plans_unsettled ON plans (state) WHERE state IN ('executing', 'needs_inspection');
    CREATE INDEX plans_pending ON plans (expires_at) WHERE state = 'pending';
    CREATE TABLE audit_v5 (
        seq INTEGER PRIMARY KEY,
        at INTEGER NOT NULL,
        event TEXT NOT NULL CHECK (event IN
            ('prepared', 'approved', 'claimed', 'completed', 'needs_inspection', 'claim_abandoned', 'invalidated',
             'inspected', 'failed', 'rejected')),
        plan_id TEXT NOT NULL REFERENCES plans (id),
        action TEXT NOT NULL CHECK (action IN
            ('deploy', 'nginx_config', 'stop', 'remove_image', 'remove_app', 'start', 'update')),
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'uncertain', 'refused')),
        exit_code INTEGER,
        duration_ms INTEGER,
        actor TEXT NOT NULL,
        prev_hash TEXT CHECK (prev_hash IS NULL OR length(prev_hash) = 64),
        hash TEXT CHECK (hash IS NULL OR length(hash) = 64)
    );
    INSERT INTO audit_v5 (seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, prev_hash, hash)
    SELECT seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, prev_hash, hash FROM audit;
    DROP TABLE audit;
    ALTER TABLE audit_v5 RENAME TO audit;
    CREATE INDEX audit_plan ON audit (plan_id);
    CREATE TABLE image_claims (
        image_id TEXT PRIMARY KEY CHECK (length(image_id) = 71 AND substr(image_id, 1, 7) = 'sha256:'),
        app TEXT NOT NULL CHECK (length(app) BETWEEN 1 AND 31),
        plan_id TEXT NOT NULL REFERENCES plans (id),
        retired_at INTEGER NOT NULL
    );",
    // 6: the boot
    // a plan was prepared on and CLOCK_BOOTTIME then, in milliseconds, so
    // that expiry on the same boot follows the boot clock, which a step of
    // the wall clock does not move (`crate::control::clock`). NULL for plans
    // made before this step: they expire by the wall clock alone.
    "ALTER TABLE plans ADD COLUMN created_boot TEXT;
     ALTER TABLE plans ADD COLUMN created_boottime_ms INTEGER CHECK (created_boottime_ms IS NULL OR created_boottime_ms >= 0);",
    // 7: every request leaves a row (issue 14). Rebuilt as in step 2 (a
    // CHECK cannot be altered):
    // - `plan_id` and `action` nullable (a refused or read-only request may
    //   name no plan), and `plan_id` no longer a foreign key: retention
    //   prunes old plans, while their audit rows stay until `audit prune`;
    // - the events `request` (one row for a request that changed nothing)
    //   and `pruned` (retention removed plans), the actions `start` and
    //   `update` (step 5 added them to plans);
    // - operation, app, stable code, process outcome category, the
    //   workstation's request id, a fold count, and the operator's two uids;
    // - `audit_anchor`: where the chain starts after `audit prune`;
    // - `audit_folds`: identical refusals within a window, counted before
    //   they are appended as one chained row (`store::fold`).
    // Rows are copied as they are, hashes included: the new columns are
    // NULL on them, and NULL columns are not part of a row's hashed content,
    // so every existing hash stays valid.
    "CREATE TABLE audit_v6 (
        seq INTEGER PRIMARY KEY,
        at INTEGER NOT NULL,
        event TEXT NOT NULL CHECK (event IN
            ('prepared', 'approved', 'claimed', 'completed', 'needs_inspection', 'claim_abandoned', 'invalidated',
             'inspected', 'failed', 'rejected', 'request', 'pruned')),
        plan_id TEXT CHECK (plan_id IS NULL OR length(plan_id) = 32),
        action TEXT CHECK (action IS NULL OR action IN
            ('deploy', 'nginx_config', 'stop', 'remove_image', 'remove_app', 'start', 'update')),
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
        hash TEXT CHECK (hash IS NULL OR length(hash) = 64)
    );
    INSERT INTO audit_v6 (seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, prev_hash, hash)
    SELECT seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, prev_hash, hash FROM audit;
    DROP TABLE audit;
    ALTER TABLE audit_v6 RENAME TO audit;
    CREATE INDEX audit_plan ON audit (plan_id);
    -- export --since and prune --before read by time.
    CREATE INDEX audit_at ON audit (at);
    CREATE TABLE audit_anchor (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        seq INTEGER NOT NULL CHECK (seq >= 1),
        prev_hash TEXT NOT NULL CHECK (length(prev_hash) = 64)
    );
    CREATE TABLE audit_folds (
        actor TEXT NOT NULL,
        operation TEXT NOT NULL,
        code TEXT NOT NULL,
        opened_at INTEGER NOT NULL,
        last_at INTEGER NOT NULL,
        count INTEGER NOT NULL CHECK (count >= 0),
        PRIMARY KEY (actor, operation, code)
    );
    -- Retention reads terminal plans by age.
    CREATE INDEX plans_finished ON plans (finished_at) WHERE finished_at IS NOT NULL;
    -- The per-requester cap on unexpired pending plans.
    CREATE INDEX plans_pending_requester ON plans (requester, expires_at) WHERE state = 'pending';",
    // 8: the ssh gate's refusals are rows (issue 13): why the gate refused,
    // and the remote command's length and sha256 (never its text), on the
    // first row of a fold (`store::fold`; the count row after it carries
    // none). Added columns are NULL on every older row, and NULL columns
    // are not part of a row's hashed content, so every hash stays valid.
    "ALTER TABLE audit ADD COLUMN gate_reason TEXT CHECK (gate_reason IS NULL OR gate_reason IN
        ('no_command', 'too_long', 'not_a_fixed_request'));
     ALTER TABLE audit ADD COLUMN command_bytes INTEGER CHECK (command_bytes IS NULL OR command_bytes >= 0);
     ALTER TABLE audit ADD COLUMN command_sha256 TEXT CHECK (command_sha256 IS NULL OR length(command_sha256) = 64);",
    // 9: every request flushes the refusal windows that have closed
    // (`store::fold`); this index finds them, in the order they are
    // appended, without reading the windows still open (issue 29).
    "CREATE INDEX audit_folds_opened ON audit_folds (opened_at, actor, operation, code);",
    // 10: the audit says what happened (issue 22).
    // - `audit_folds` (unchained, rebuilt freely) folds per kind: the
    //   outcome (`ok` for successful reads, which fold since this step) and
    //   the gate's reason join the key, so a refusal of one reason no longer
    //   counts inside another's window; the window keeps the length and
    //   digest of the latest refused command, which its count row carries.
    //   Open windows are kept, as refusals of no particular reason.
    // - `audit.anchor_seq`, `audit.anchor_hash`: a `pruned` row names the
    //   anchor its pruning set, so `verify` can tell a start that a pruning
    //   accounts for from rows deleted at the start and the anchor forged.
    //   NULL on every older row, and NULL columns are not part of a row's
    //   hashed content, so every hash stays valid.
    "CREATE TABLE audit_folds_v10 (
        actor TEXT NOT NULL,
        operation TEXT NOT NULL,
        outcome TEXT NOT NULL DEFAULT 'refused' CHECK (outcome IN ('ok', 'refused')),
        code TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        opened_at INTEGER NOT NULL,
        last_at INTEGER NOT NULL,
        count INTEGER NOT NULL CHECK (count >= 0),
        command_bytes INTEGER CHECK (command_bytes IS NULL OR command_bytes >= 0),
        command_sha256 TEXT CHECK (command_sha256 IS NULL OR length(command_sha256) = 64),
        PRIMARY KEY (actor, operation, outcome, code, reason)
    );
    INSERT INTO audit_folds_v10 (actor, operation, code, opened_at, last_at, count)
    SELECT actor, operation, code, opened_at, last_at, count FROM audit_folds;
    DROP TABLE audit_folds;
    ALTER TABLE audit_folds_v10 RENAME TO audit_folds;
    CREATE INDEX audit_folds_opened ON audit_folds (opened_at, actor, operation, outcome, code, reason);
    ALTER TABLE audit ADD COLUMN anchor_seq INTEGER CHECK (anchor_seq IS NULL OR anchor_seq >= 1);
    ALTER TABLE audit ADD COLUMN anchor_hash TEXT CHECK (anchor_hash IS NULL OR length(anchor_hash) = 64);",
    // 11: why a plan failed (issue 26): the code and whole sentence of its
    // refusal, set with the outcome (`Tx::fail`), so `show` tells the
    // operator what `rolled_back` alone does not. NULL on older rows.
    "ALTER TABLE plans ADD COLUMN failure_code TEXT CHECK (failure_code IS NULL OR length(failure_code) BETWEEN 1 AND 64);
     ALTER TABLE plans ADD COLUMN failure_message TEXT
        CHECK (failure_message IS NULL OR length(failure_message) BETWEEN 1 AND 2000);",
    // 12: the operator's reason for a `reject` (issue 24), bounded, only on a
    // rejected plan; and whether the syslog alert of a plan that waits for
    // approval was sent (1) or could not be (0), NULL when none was due.
    "ALTER TABLE plans ADD COLUMN rejected_reason TEXT CHECK (rejected_reason IS NULL OR
        (length(rejected_reason) BETWEEN 1 AND 500 AND rejected_by IS NOT NULL));
     ALTER TABLE plans ADD COLUMN alerted INTEGER CHECK (alerted IS NULL OR alerted IN (0, 1));",
    // 13: the actions `restart` and `rollback` (issue 25) in both action
    // CHECK lists, in one rebuild (both came with 0.2.0, so no database
    // ever had one without the other). Rebuilt as step 5 did (a CHECK cannot be altered), every column
    // copied as it is, in the order the earlier steps left them: the audit
    // rows keep their hashes, and since an action string is copied byte
    // for byte, every link of the chain still verifies.
        include_str!("schema/v13.sql"),
    // 14 (issue 25; after 13's rebuild, which names every column it copies
    // and so must run before this one): a
    // rolled-back plan's failed app container's last lines
    // (`crate::logs::AppLog` as JSON: safe, bounded, marked untrusted),
    // kept with the failure (`Tx::keep_app_log`), so `show` says why the
    // app did not answer. A nullable column added, no rebuild: NULL on
    // every older row and on every plan without such lines.
    "ALTER TABLE plans ADD COLUMN app_log TEXT
        CHECK (app_log IS NULL OR (length(app_log) BETWEEN 2 AND 16384 AND json_valid(app_log)));",
    // 15 (issue 36): the action names leave the schema, the last rebuild a
    // new action needs. Each action is one file of `crate::actions`, and
    // listing the names here made every new one a table rebuild too; the
    // store writes an action only from `crate::vocab::Action` and reads one
    // back through its name table (an unknown name is a corrupt row), so
    // the columns keep only the shape of a name (1 to 31 characters of a-z
    // and `_`). Rebuilt as step 13 was, every column copied as it is, in
    // the order the earlier steps left them (14's app_log last): the audit
    // rows keep their hashes, and every link of the chain still verifies.
    include_str!("schema/v15.sql"),
    // 16 (issue 38): a refusal window keeps every distinct command digest
    // it counted, not the latest alone, so a forged refusal after a real
    // one of the same reason no longer replaces the real one's digest.
    // `audit_folds.digests` (a JSON array, the first 16 distinct, in the
    // order first seen) and `beyond` (the repeats whose digest was not
    // kept) fill the window; the count row carries them as
    // `command_digests` and `commands_beyond`. Why a step and not an
    // existing column: every column that could hold the list checks its
    // shape (`command_sha256` is 64 characters), and loosening that is a
    // rebuild. Columns added, nothing rebuilt: NULL on every older audit
    // row, and NULL columns are not part of a row's hashed content, so
    // every hash stays valid; an open window starts with an empty list.
    "ALTER TABLE audit_folds ADD COLUMN digests TEXT NOT NULL DEFAULT '[]'
        CHECK (json_valid(digests) AND json_type(digests) = 'array' AND json_array_length(digests) <= 16);
     ALTER TABLE audit_folds ADD COLUMN beyond INTEGER NOT NULL DEFAULT 0 CHECK (beyond >= 0);
     ALTER TABLE audit ADD COLUMN command_digests TEXT CHECK (command_digests IS NULL OR
        (json_valid(command_digests) AND json_type(command_digests) = 'array'
         AND json_array_length(command_digests) BETWEEN 1 AND 16));
     ALTER TABLE audit ADD COLUMN commands_beyond INTEGER CHECK (commands_beyond IS NULL OR commands_beyond >= 1);",
    // 17 (issue 42): an approval signed on the operator's own device is
    // recorded with the key that signed it (`signer_key`, its OpenSSH
    // SHA256 fingerprint) and the digest of the statement it signed
    // (`statement_sha256`), both in the row's hashed content. In the same
    // rebuild the `operation` column keeps only the shape of a name, as
    // step 15 did for `action`: the rpc's new operations (`statement`,
    // `signed_approval`) and the operator's state commands no longer each
    // need a rebuild. Rebuilt as step 15 was, every older column copied as
    // it is, in order: the rows keep their hashes (the new columns are NULL
    // on them, and NULL columns are not hashed), and the chain verifies.
    include_str!("schema/v17.sql"),
];

/// The step after whose SQL the existing audit rows are chained
/// (`chain::backfill`, which needs sha256 and so cannot be SQL).
pub(super) const CHAIN_STEP: usize = 4;

/// The step that gave audit rows their list of command digests
/// (`fold.rs`); an older database's rows are read without it.
pub(super) const DIGESTS_STEP: i64 = 16;

/// The step that gave audit rows the signer of a signed approval; an older
/// database's rows are read without it.
pub(super) const SIGNERS_STEP: i64 = 17;

/// The schema version this code writes: the number of migrations.
pub(super) fn supported_version() -> i64 {
    MIGRATIONS.len() as i64
}

#[cfg(test)]
mod tests;

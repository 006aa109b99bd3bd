//! Every SQL statement the store runs on its tables, by name, in one table,
//! and the one way to run one. Runs as root inside the host helper, within
//! the transaction of the caller.
//!
//! Why one table: a request path must cost the same however long the
//! history grows, and the test that holds every statement to that
//! (`tests/statements.rs`: `EXPLAIN QUERY PLAN` on a database with history)
//! can only check the statements it knows. [`Sql`] runs nothing but a
//! [`Statement`], and outside tests a `Statement` can only be made by the
//! `statements!` list below, which also builds `ALL`: so a statement the
//! store can run is a statement the test checks. (The migrations in `schema.rs` and the
//! pragmas `database.rs` sets on opening are not statements on the tables'
//! rows and stay there.)
//!
//! Each statement says its [`Reach`]: [`Reach::Bounded`] (an index or a
//! bounded range serves it, whatever the history; everything a request runs)
//! or [`Reach::Whole`] (reads the whole trail on purpose: the operator's
//! audit commands, the doctor and a migration).

use rusqlite::{CachedStatement, Transaction};

/// How much of the history a statement may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    /// An index or a bounded range serves it: no full scan of `plans`,
    /// `audit` or `audit_folds`. Every statement of a request path
    /// (`rpc`, `show`, `list`, `approve`, `reject`, `resolve`, request rows).
    Bounded,
    /// Reads every row on purpose; never run by a request path.
    Whole,
}

/// One named statement of the table below.
#[derive(Debug, Clone, Copy)]
pub(super) struct Statement {
    #[cfg_attr(not(test), expect(dead_code, reason = "named in the EXPLAIN test's failures"))]
    name: &'static str,
    sql: &'static str,
    #[cfg_attr(not(test), expect(dead_code, reason = "what the EXPLAIN test holds it to"))]
    reach: Reach,
}

#[cfg(test)]
impl Statement {
    pub(super) fn name(self) -> &'static str {
        self.name
    }
    pub(super) fn sql(self) -> &'static str {
        self.sql
    }
    pub(super) fn reach(self) -> Reach {
        self.reach
    }
    /// A statement outside the table, for the test of the test.
    pub(super) const fn for_tests(name: &'static str, sql: &'static str) -> Statement {
        Statement { name, sql, reach: Reach::Bounded }
    }
}

/// A transaction that runs only the statements of this table.
#[derive(Clone, Copy)]
pub(super) struct Sql<'a>(&'a Transaction<'a>);

impl<'a> Sql<'a> {
    pub(super) fn new(tx: &'a Transaction<'a>) -> Sql<'a> {
        Sql(tx)
    }

    /// The statement, prepared once per connection (rusqlite's cache).
    pub(super) fn prepare(self, statement: Statement) -> rusqlite::Result<CachedStatement<'a>> {
        self.0.prepare_cached(statement.sql)
    }
}

/// Defines each statement as a `const` and [`ALL`] as the list of them.
/// Every statement carries a doc comment: what it is for, and for a bounded
/// one what serves it.
macro_rules! statements {
    ($($(#[doc = $doc:expr])+ $reach:ident $name:ident = $sql:expr;)+) => {
        $(
            $(#[doc = $doc])+
            pub(super) const $name: Statement =
                Statement { name: stringify!($name), sql: $sql, reach: Reach::$reach };
        )+
        /// Every statement above, in order: what the EXPLAIN test walks.
        #[cfg(test)]
        pub(super) const ALL: &[Statement] = &[$($name),+];
    };
}

/// The columns `load_plan` reads, in its order.
macro_rules! plan_columns {
    () => {
        "body, state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, \
         claimed_at, finished_at, outcome, resolved_by, resolved_at, rejected_by, rejected_at, failure_code, \
         failure_message, rejected_reason, alerted, app_log"
    };
}

/// Every column of an audit row, in the order `chain::entry` reads them.
/// With `"NULL, NULL"` in place of the two columns of a later step, the
/// same for a database before it (a restore held for a downgrade, a
/// migration that waits): step 16's digest list, step 17's signer.
macro_rules! audit_rows {
    () => {
        audit_rows!("command_digests, commands_beyond", "signer_key, statement_sha256")
    };
    ($digests:literal, $signer:literal) => {
        concat!(
            "SELECT seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, \
             operation, app, code, process, request_id, count, sudo_uid, login_uid, \
             gate_reason, command_bytes, command_sha256, anchor_seq, anchor_hash, ",
            $digests,
            ", ",
            $signer,
            ", prev_hash, hash FROM audit"
        )
    };
}

/// What retention may prune besides its own condition: a plan no app
/// record and no image claim names.
macro_rules! unnamed {
    () => {
        "id NOT IN (SELECT plan_id FROM apps) AND id NOT IN (SELECT plan_id FROM image_claims)"
    };
}

statements! {
    // ---- plans: the gate, the claims, one plan, the operator's list ----

    /// The new-plan gate. Served by the partial index `plans_unsettled`.
    Bounded UNSETTLED = "SELECT id, state FROM plans WHERE state IN ('executing', 'needs_inspection') LIMIT 1";
    /// Claimed plans. The repeated IN term is what lets SQLite use the
    /// partial index: it only does when the query's WHERE contains the
    /// index's WHERE term verbatim (`state = 'executing'` alone scans the
    /// whole table).
    Bounded EXECUTING = "SELECT id, action, claim_pid, claim_start, claim_boot FROM plans \
                         WHERE state IN ('executing', 'needs_inspection') AND state = 'executing'";
    /// Every unsettled plan, for the doctor's report (`plans_unsettled`).
    Bounded UNSETTLED_ALL =
        "SELECT id, state FROM plans WHERE state IN ('executing', 'needs_inspection') ORDER BY id";
    /// A freshly sealed plan, pending.
    Bounded INSERT_PLAN =
        "INSERT INTO plans (id, action, body, digest, requires_approval, requester, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
    /// One plan by id (its unique index).
    Bounded LOAD_PLAN = concat!("SELECT ", plan_columns!(), " FROM plans WHERE id = ?1");
    /// The operator's `list`: unexpired pending plans (through the partial
    /// index `plans_pending`) and the unsettled ones (through
    /// `plans_unsettled`). `?1` is now.
    Bounded AWAITING = "SELECT id FROM plans WHERE state = 'pending' AND expires_at >= ?1 \
                        UNION ALL SELECT id FROM plans WHERE state IN ('executing', 'needs_inspection')";
    /// How many pending plans have expired (they stay pending for good, and
    /// nothing can approve or execute them; `plans_pending`). `?1` is now.
    Bounded EXPIRED_PENDING = "SELECT count(*) FROM plans WHERE state = 'pending' AND expires_at < ?1";
    /// The boot clock at a just-inserted plan's prepare (by id).
    Bounded SET_PLAN_BOOT = "UPDATE plans SET created_boot = ?2, created_boottime_ms = ?3
                             WHERE id = ?1 AND created_boot IS NULL AND state = 'pending'";
    /// The boot clock at a plan's prepare (by id).
    Bounded PLAN_BOOT = "SELECT created_boot, created_boottime_ms FROM plans WHERE id = ?1";

    // ---- plans: the transitions, each one conditional UPDATE by id ----

    /// An approval on a pending, not yet approved plan.
    Bounded APPROVE = "UPDATE plans SET approved_by = ?2, approved_at = ?3, approved_digest = ?4
                       WHERE id = ?1 AND state = 'pending' AND approved_by IS NULL AND digest = ?4";
    /// pending -> executing, recording the claimer.
    Bounded CLAIM = "UPDATE plans SET state = 'executing', claim_pid = ?2, claim_start = ?3, claim_boot = ?4,
                     claimed_at = ?5 WHERE id = ?1 AND state = 'pending'";
    /// executing -> a finished state, only by the same claimer.
    Bounded FINISH = "UPDATE plans SET state = ?2, outcome = ?3, finished_at = ?4, failure_code = ?8,
                      failure_message = ?9
                      WHERE id = ?1 AND state = 'executing' AND claim_pid = ?5 AND claim_start = ?6
                      AND claim_boot = ?7";
    /// A failed plan's app log, once, beside its failure (by id).
    Bounded KEEP_APP_LOG = "UPDATE plans SET app_log = ?2
                            WHERE id = ?1 AND state = 'failed' AND failure_code IS NOT NULL AND app_log IS NULL";
    /// pending -> invalidated.
    Bounded INVALIDATE = "UPDATE plans SET state = 'invalidated', outcome = ?2, finished_at = ?3
                          WHERE id = ?1 AND state = 'pending'";
    /// executing -> invalidated, only by the same claimer.
    Bounded VOID_CLAIMED = "UPDATE plans SET state = 'invalidated', outcome = ?2, finished_at = ?3
                            WHERE id = ?1 AND state = 'executing' AND claim_pid = ?4 AND claim_start = ?5
                            AND claim_boot = ?6";
    /// needs_inspection -> inspected.
    Bounded RESOLVE = "UPDATE plans SET state = 'inspected', resolved_by = ?2, resolved_at = ?3
                       WHERE id = ?1 AND state = 'needs_inspection'";
    /// pending -> rejected.
    Bounded REJECT = "UPDATE plans SET state = 'rejected', rejected_by = ?2, rejected_at = ?3, finished_at = ?3,
                      rejected_reason = ?4 WHERE id = ?1 AND state = 'pending'";
    /// Whether the syslog alert of a new plan went out; once per plan.
    Bounded ALERTED = "UPDATE plans SET alerted = ?2 WHERE id = ?1 AND alerted IS NULL";

    // ---- apps and image claims (small tables: one row per app or image) ----

    /// Every app record.
    Bounded APPS = "SELECT name, state, record FROM apps";
    /// Inserts or replaces one app record.
    Bounded PUT_APP =
        "INSERT INTO apps (name, state, host_port, record, plan_id, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (name) DO UPDATE SET state = excluded.state, host_port = excluded.host_port,
         record = excluded.record, plan_id = excluded.plan_id, updated_at = excluded.updated_at";
    /// Forgets one app record.
    Bounded DELETE_APP = "DELETE FROM apps WHERE name = ?1";
    /// Keeps one image claimed for a removed app.
    Bounded RETIRE_CLAIM =
        "INSERT INTO image_claims (image_id, app, plan_id, retired_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (image_id) DO UPDATE SET app = excluded.app, plan_id = excluded.plan_id,
         retired_at = excluded.retired_at";
    /// Every retired claim.
    Bounded RETIRED_CLAIMS = "SELECT image_id, app FROM image_claims";
    /// Drops one image's claim.
    Bounded DROP_CLAIM = "DELETE FROM image_claims WHERE image_id = ?1";

    // ---- the audit chain: appending ----

    /// The last row's seq and hash, which the next row chains from. Written
    /// as `max(seq)` so that its plan says it reads one row (`ORDER BY seq
    /// DESC LIMIT 1` reads one too, but its plan is `SCAN audit`).
    Bounded LAST_ROW = "SELECT seq, hash FROM audit WHERE seq = (SELECT max(seq) FROM audit)";
    /// One chained row (`chain::append`, the only insert into `audit`).
    Bounded INSERT_AUDIT =
        "INSERT INTO audit (seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor,
             operation, app, code, process, request_id, count, sudo_uid, login_uid,
             gate_reason, command_bytes, command_sha256, anchor_seq, anchor_hash, command_digests,
             commands_beyond, signer_key, statement_sha256, prev_hash, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,
             ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28)";
    /// Where the kept chain starts (a one-row table).
    Bounded ANCHOR = "SELECT seq, prev_hash FROM audit_anchor WHERE id = 1";
    /// The state changes of one plan (`audit_plan`).
    Bounded AUDIT_OF = "SELECT at, event, plan_id, action, outcome, exit_code, duration_ms, actor FROM audit
                        WHERE plan_id = ?1 AND event <> 'request' ORDER BY seq";

    // ---- request rows: identical refusals folded (`fold.rs`) ----

    /// One more repeat of a kind in its open window (the primary key):
    /// the latest command's length and digest replace the ones before, and
    /// a digest the window has not seen joins its list while the list holds
    /// fewer than `?9`, else counts in `beyond` (issue 38). Every
    /// expression reads the row as it was before this update.
    Bounded FOLD_COUNT = "UPDATE audit_folds SET count = count + 1, last_at = max(last_at, ?6),
                          command_bytes = ?7, command_sha256 = ?8,
                          digests = CASE WHEN ?8 IS NULL OR ?8 IN (SELECT value FROM json_each(digests))
                              OR json_array_length(digests) >= ?9 THEN digests
                              ELSE json_insert(digests, '$[#]', ?8) END,
                          beyond = beyond + CASE WHEN ?8 IS NULL OR ?8 IN (SELECT value FROM json_each(digests))
                              OR json_array_length(digests) < ?9 THEN 0 ELSE 1 END
                          WHERE actor = ?1 AND operation = ?2 AND outcome = ?3 AND code = ?4 AND reason = ?5";
    /// A window opened by a kind's first row.
    Bounded FOLD_OPEN = "INSERT INTO audit_folds (actor, operation, outcome, code, reason, opened_at, last_at, count)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, 0)";
    /// The windows closed by now, in the order they are appended. `?1` is
    /// the window, `?2` now; the bound is on the column alone, so that the
    /// index `audit_folds_opened` (migration 10) serves it.
    Bounded FOLDS_CLOSED = "SELECT actor, operation, outcome, code, reason, last_at, count, command_bytes,
                            command_sha256, digests, beyond FROM audit_folds WHERE opened_at <= ?2 - ?1
                            ORDER BY opened_at, actor, operation, outcome, code, reason";
    /// Forgets the windows closed by now (`audit_folds_opened`).
    Bounded FOLDS_DROP = "DELETE FROM audit_folds WHERE opened_at <= ?2 - ?1";

    // ---- retention (`retention.rs`) ----

    /// Terminal plans finished before `?1`, at most `?2` (`plans_finished`).
    Bounded PRUNE_FINISHED = concat!(
        "DELETE FROM plans WHERE seq IN (SELECT seq FROM plans WHERE finished_at IS NOT NULL \
         AND finished_at < ?1 AND state IN ('completed', 'invalidated', 'inspected', 'failed', 'rejected') \
         AND ", unnamed!(), " LIMIT ?2)"
    );
    /// Pending plans expired before `?1`, at most `?2` (`plans_pending`).
    Bounded PRUNE_EXPIRED = concat!(
        "DELETE FROM plans WHERE seq IN (SELECT seq FROM plans WHERE state = 'pending' AND expires_at < ?1 \
         AND ", unnamed!(), " LIMIT ?2)"
    );
    /// A requester's unexpired pending plans (`plans_pending_requester`).
    Bounded PENDING_OF =
        "SELECT count(*) FROM plans WHERE state = 'pending' AND requester = ?1 AND expires_at >= ?2";

    /// Audit retention: the time of the oldest kept row (`max`'s twin:
    /// one row by the primary key).
    Bounded FIRST_ROW_AT = "SELECT at FROM audit WHERE seq = (SELECT min(seq) FROM audit)";
    /// Audit retention: at most `?2 + 1` rows from seq `?1` on (a range of
    /// the primary key).
    Bounded ROWS_FROM = concat!(audit_rows!(), " WHERE seq >= ?1 AND seq <= ?1 + ?2 ORDER BY seq");

    /// The audit proof a reply carries (`trail::audit_proof`): the hash of
    /// the row at seq `?1` (the workstation's witnessed one).
    Bounded ROW_HASH = "SELECT hash FROM audit WHERE seq = ?1";

    // ---- the operator's audit commands, the doctor, migrations ----

    /// `audit prune`: the first row kept.
    Whole FIRST_KEPT = "SELECT seq, prev_hash FROM audit WHERE at >= ?1 ORDER BY seq LIMIT 1";
    /// `audit prune` and audit retention: drops the rows before the first
    /// kept (a range of the primary key; retention drops at most
    /// `retention::AUDIT_PRUNE_BATCH` with it).
    Bounded DROP_AUDIT_BEFORE = "DELETE FROM audit WHERE seq < ?1";
    /// `audit prune`: the new anchor.
    Bounded SET_ANCHOR = "INSERT INTO audit_anchor (id, seq, prev_hash) VALUES (1, ?1, ?2)
                          ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, prev_hash = excluded.prev_hash";
    /// `audit head`: how many rows.
    Whole COUNT_ROWS = "SELECT count(*) FROM audit";
    /// `audit head`: the last row (as `LAST_ROW`).
    Bounded HEAD_ROW = "SELECT seq, at, hash FROM audit WHERE seq = (SELECT max(seq) FROM audit)";
    /// `audit verify` and the doctor: every row in order.
    Whole ALL_ROWS = concat!(audit_rows!(), " ORDER BY seq");
    /// The schema version of the database at hand (`verify` reads older ones too).
    Bounded SCHEMA_VERSION = "SELECT user_version FROM pragma_user_version";
    /// [`ALL_ROWS`] of a database before schema step 16 (`verify` on the
    /// doctor's read of an older database).
    Whole ALL_ROWS_BEFORE_DIGESTS = concat!(audit_rows!("NULL, NULL", "NULL, NULL"), " ORDER BY seq");
    /// [`ALL_ROWS`] of a database at schema step 16.
    Whole ALL_ROWS_BEFORE_SIGNERS =
        concat!(audit_rows!("command_digests, commands_beyond", "NULL, NULL"), " ORDER BY seq");
    /// `audit export --since`: the rows from `?1` on.
    Whole ROWS_SINCE = concat!(audit_rows!(), " WHERE at >= ?1 ORDER BY seq");
    /// Migration 4: the rows before the chain, with the columns they had.
    Whole V4_ROWS =
        "SELECT seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor FROM audit ORDER BY seq";
    /// Migration 4: one row's hashes.
    Whole BACKFILL = "UPDATE audit SET prev_hash = ?2, hash = ?3 WHERE seq = ?1";
    /// A migration's last check: no dangling reference.
    Whole FOREIGN_KEY_CHECK = "PRAGMA foreign_key_check";
    /// The doctor: SQLite's own check of the whole file.
    Whole INTEGRITY_CHECK = "PRAGMA integrity_check";
}

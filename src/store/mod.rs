//! The controller's durable state in SQLite: plans, apps and the audit
//! trail. Runs as root inside the host helper, on `<state dir>/state.db`.
//!
//! Invariants enforced here:
//! - pragmas (WAL, synchronous=FULL, foreign_keys=ON, busy timeout) are set
//!   and read back; a connection where one did not apply is refused, since
//!   SQLite ignores what it does not understand without a word;
//! - the schema is an append-only list of migrations counted in
//!   `PRAGMA user_version`; a database newer than this code is refused;
//! - states are guarded by CHECK constraints, so no bug can store a state
//!   that is not in the list;
//! - every write runs in a `BEGIN IMMEDIATE` transaction ([`Store::write`]),
//!   so two helpers never both decide on stale reads;
//! - every transition is one `UPDATE ... WHERE id=? AND state=?` that must
//!   change exactly one row, and writes its audit row in the same
//!   transaction: no audit row, no change;
//! - audit rows hold categories and numbers only: never commands, output or
//!   free text an agent wrote;
//! - every query that runs per request is served by an index, so its cost
//!   does not grow with the number of stored plans.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension as _, Transaction, TransactionBehavior, params};
use serde::Serialize;

use crate::control::plan::{Action, Digest, Plan, PlanId};
use crate::control::validate::AppRecord;
use crate::control::{Code, Refusal};

/// How long a writer waits for another helper's transaction.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The schema, one step per entry. Append only: never edit a shipped step.
const MIGRATIONS: &[&str] = &[
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

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the state database failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the state database did not accept `PRAGMA {0}`; refusing to run without it")]
    PragmaNotApplied(&'static str),
    #[error(
        "the state database is at schema version {found}, newer than this program ({supported}); refusing to touch it"
    )]
    TooNew { found: i64, supported: i64 },
    #[error("{0}")]
    Refused(Refusal),
    #[error("a transition of plan {0} found the plan in another state; nothing was changed")]
    Conflict(String),
    #[error("a stored record is unreadable; inspect the state database")]
    Corrupt,
}

impl From<Refusal> for StoreError {
    fn from(refusal: Refusal) -> Self {
        StoreError::Refused(refusal)
    }
}

impl StoreError {
    /// The stable code and sentence for the wire.
    pub fn refusal(&self) -> Refusal {
        match self {
            StoreError::Refused(refusal) => refusal.clone(),
            StoreError::Conflict(_) => Refusal::new(
                Code::PlanConsumed,
                "The plan changed state while this request ran; inspect it before doing anything else.",
            ),
            StoreError::Corrupt => Refusal::new(
                Code::PlanCorrupt,
                "A stored record is unreadable; an operator must inspect the state.",
            ),
            _ => Refusal::new(
                Code::StateUnavailable,
                "The host's state database is unavailable; nothing was changed.",
            ),
        }
    }
}

/// Where a plan is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanState {
    Pending,
    Executing,
    Completed,
    NeedsInspection,
    /// Refused at execute because the policy or the server changed: its
    /// approval is void for good.
    Invalidated,
    /// Was `needs_inspection`; an operator attested with `resolve` that they
    /// inspected the server. Terminal.
    Inspected,
    /// The engine failed but provably changed nothing (refused before its
    /// first mutation, or rolled back and verified). Terminal; blocks nothing.
    Failed,
}

impl PlanState {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanState::Pending => "pending",
            PlanState::Executing => "executing",
            PlanState::Completed => "completed",
            PlanState::NeedsInspection => "needs_inspection",
            PlanState::Invalidated => "invalidated",
            PlanState::Inspected => "inspected",
            PlanState::Failed => "failed",
        }
    }
    fn parse(value: &str) -> Result<PlanState, StoreError> {
        Ok(match value {
            "pending" => PlanState::Pending,
            "executing" => PlanState::Executing,
            "completed" => PlanState::Completed,
            "needs_inspection" => PlanState::NeedsInspection,
            "invalidated" => PlanState::Invalidated,
            "inspected" => PlanState::Inspected,
            "failed" => PlanState::Failed,
            _ => return Err(StoreError::Corrupt),
        })
    }
}

/// Why a plan ended where it did (a category, never free text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanOutcome {
    Completed,
    /// The engine reported a failure; the change may be partial.
    EngineFailed,
    /// The process that claimed the plan died before recording an outcome.
    ClaimerDied,
    /// The engine acted but the result could not be recorded.
    RecordFailed,
    PolicyChanged,
    SnapshotChanged,
    /// The change failed, and what it had changed was restored and verified.
    RolledBack,
    /// The engine refused before its first mutation: nothing was touched.
    NotStarted,
}

impl PlanOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanOutcome::Completed => "completed",
            PlanOutcome::EngineFailed => "engine_failed",
            PlanOutcome::ClaimerDied => "claimer_died",
            PlanOutcome::RecordFailed => "record_failed",
            PlanOutcome::PolicyChanged => "policy_changed",
            PlanOutcome::SnapshotChanged => "snapshot_changed",
            PlanOutcome::RolledBack => "rolled_back",
            PlanOutcome::NotStarted => "not_started",
        }
    }
    fn parse(value: &str) -> Result<PlanOutcome, StoreError> {
        Ok(match value {
            "completed" => PlanOutcome::Completed,
            "engine_failed" => PlanOutcome::EngineFailed,
            "claimer_died" => PlanOutcome::ClaimerDied,
            "record_failed" => PlanOutcome::RecordFailed,
            "policy_changed" => PlanOutcome::PolicyChanged,
            "snapshot_changed" => PlanOutcome::SnapshotChanged,
            "rolled_back" => PlanOutcome::RolledBack,
            "not_started" => PlanOutcome::NotStarted,
            _ => return Err(StoreError::Corrupt),
        })
    }
}

/// Who claimed a plan for execution: enough to tell later whether that
/// process still lives (pid, its start time in clock ticks since boot, and
/// the boot id; a pid alone can be reused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claim {
    pub pid: i32,
    pub start_time: u64,
    pub boot_id: String,
}

/// An approval as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approval {
    pub by: String,
    pub at: i64,
    pub digest: Digest,
}

/// An operator's `resolve` of a plan that needed inspection, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolution {
    pub by: String,
    pub at: i64,
}

/// A plan and its life cycle, as read from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPlan {
    pub plan: Plan,
    pub state: PlanState,
    pub approval: Option<Approval>,
    pub claim: Option<Claim>,
    pub claimed_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub outcome: Option<PlanOutcome>,
    /// Present only in state `inspected`.
    pub resolution: Option<Resolution>,
}

impl StoredPlan {
    /// The JSON the rpc `plan` reply and `show --json` print: every field of
    /// the immutable plan, then the life cycle beside it.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(&self.plan).expect("plan serializes");
        let object = value.as_object_mut().expect("plan is an object");
        object.insert("state".into(), serde_json::json!(self.state));
        object.insert("approval".into(), serde_json::json!(self.approval));
        object.insert("claimed_at".into(), serde_json::json!(self.claimed_at));
        object.insert("finished_at".into(), serde_json::json!(self.finished_at));
        object.insert("outcome".into(), serde_json::json!(self.outcome));
        object.insert("resolution".into(), serde_json::json!(self.resolution));
        value
    }
}

/// Audit events, one per state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Prepared,
    Approved,
    Claimed,
    Completed,
    NeedsInspection,
    ClaimAbandoned,
    Invalidated,
    Inspected,
    Failed,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Prepared => "prepared",
            Event::Approved => "approved",
            Event::Claimed => "claimed",
            Event::Completed => "completed",
            Event::NeedsInspection => "needs_inspection",
            Event::ClaimAbandoned => "claim_abandoned",
            Event::Invalidated => "invalidated",
            Event::Inspected => "inspected",
            Event::Failed => "failed",
        }
    }
}

/// The outcome category of an audit row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOutcome {
    Ok,
    Failed,
    Uncertain,
    Refused,
}

impl AuditOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Ok => "ok",
            AuditOutcome::Failed => "failed",
            AuditOutcome::Uncertain => "uncertain",
            AuditOutcome::Refused => "refused",
        }
    }
}

/// One audit row. Numbers and categories only, by construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub at: i64,
    pub event: Event,
    pub outcome: AuditOutcome,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    /// The requester or the approver: a validated unix user name.
    pub actor: String,
}

/// An audit row as read back (for tests and the operator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub at: i64,
    pub event: String,
    pub plan_id: String,
    pub action: String,
    pub outcome: String,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<i64>,
    pub actor: String,
}

/// One open state database.
pub struct Store {
    conn: Connection,
}

impl Store {
    /// Opens (creating if needed) the database at `path`, applies and checks
    /// the pragmas, and migrates the schema.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)?;
        let mut store = Store { conn };
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    fn configure(&self) -> Result<(), StoreError> {
        let conn = &self.conn;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let timeout: i64 = conn.pragma_query_value(None, "busy_timeout", |r| r.get(0))?;
        if timeout != BUSY_TIMEOUT.as_millis() as i64 {
            return Err(StoreError::PragmaNotApplied("busy_timeout"));
        }
        let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
        let mode_now: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") || !mode_now.eq_ignore_ascii_case("wal") {
            return Err(StoreError::PragmaNotApplied("journal_mode"));
        }
        conn.pragma_update(None, "synchronous", "FULL")?;
        let synchronous: i64 = conn.pragma_query_value(None, "synchronous", |r| r.get(0))?;
        if synchronous != 2 {
            return Err(StoreError::PragmaNotApplied("synchronous"));
        }
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let foreign_keys: i64 = conn.pragma_query_value(None, "foreign_keys", |r| r.get(0))?;
        if foreign_keys != 1 {
            return Err(StoreError::PragmaNotApplied("foreign_keys"));
        }
        Ok(())
    }

    /// The schema version this code writes.
    pub fn supported_version() -> i64 {
        MIGRATIONS.len() as i64
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let supported = Store::supported_version();
        // The common case (up to date) needs no write lock.
        let current: i64 = self.conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if current == supported {
            return Ok(());
        }
        // Rebuilding a table that others reference (step 2) needs foreign
        // keys off: the pragma is a no-op inside a transaction, so it is
        // switched around it, every reference is checked before the commit,
        // and it is switched on again and read back whatever happened.
        self.conn.pragma_update(None, "foreign_keys", "OFF")?;
        let result = self.migrate_steps(supported);
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        let foreign_keys: i64 = self.conn.pragma_query_value(None, "foreign_keys", |r| r.get(0))?;
        if foreign_keys != 1 {
            return Err(StoreError::PragmaNotApplied("foreign_keys"));
        }
        result
    }

    fn migrate_steps(&mut self, supported: i64) -> Result<(), StoreError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if found > supported {
            return Err(StoreError::TooNew { found, supported });
        }
        for (index, step) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.execute_batch(step)?;
            tx.pragma_update(None, "user_version", index as i64 + 1)?;
        }
        let dangling: Option<String> =
            tx.query_row("PRAGMA foreign_key_check", [], |r| r.get(0)).optional()?;
        if dangling.is_some() {
            return Err(StoreError::Corrupt);
        }
        tx.commit()?;
        Ok(())
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction: committed when it
    /// returns Ok, rolled back (nothing changed) when it returns Err.
    pub fn write<T, E: From<StoreError>>(
        &mut self,
        work: impl FnOnce(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| E::from(StoreError::from(e)))?;
        let value = work(&Tx { tx: &tx })?;
        tx.commit().map_err(|e| E::from(StoreError::from(e)))?;
        Ok(value)
    }

    /// A consistent read (deferred transaction: takes no write lock).
    pub fn read<T, E: From<StoreError>>(
        &mut self,
        work: impl FnOnce(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(|e| E::from(StoreError::from(e)))?;
        let value = work(&Tx { tx: &tx })?;
        tx.commit().map_err(|e| E::from(StoreError::from(e)))?;
        Ok(value)
    }

    /// The raw connection, for benchmarks and tests that fill history fast.
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }
}

/// The operations available inside a transaction.
pub struct Tx<'a> {
    tx: &'a Transaction<'a>,
}

/// The new-plan gate. Served by the partial index `plans_unsettled`.
pub const SQL_UNSETTLED: &str =
    "SELECT id, state FROM plans WHERE state IN ('executing', 'needs_inspection') LIMIT 1";
/// Claimed plans. The repeated IN term is what lets SQLite use the partial
/// index: it only does when the query's WHERE contains the index's WHERE
/// term verbatim (`state = 'executing'` alone scans the whole table).
pub const SQL_EXECUTING: &str = "SELECT id, action, claim_pid, claim_start, claim_boot FROM plans \
                                 WHERE state IN ('executing', 'needs_inspection') AND state = 'executing'";

const PLAN_COLUMNS: &str = "body, state, approved_by, approved_at, approved_digest, claim_pid, claim_start, \
                            claim_boot, claimed_at, finished_at, outcome, resolved_by, resolved_at";

impl Tx<'_> {
    /// Whether any plan is executing or needs inspection (the new-plan gate).
    pub fn unsettled_plan(&self) -> Result<Option<(PlanId, PlanState)>, StoreError> {
        let row: Option<(String, String)> =
            self.tx.query_row(SQL_UNSETTLED, [], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
        row.map(|(id, state)| {
            Ok((PlanId::parse(&id).map_err(|_| StoreError::Corrupt)?, PlanState::parse(&state)?))
        })
        .transpose()
    }

    /// Every plan currently claimed for execution, with its claimer.
    pub fn executing_plans(&self) -> Result<Vec<(PlanId, Action, Claim)>, StoreError> {
        let mut statement = self.tx.prepare_cached(SQL_EXECUTING)?;
        let rows = statement.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i32>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, action, pid, start, boot) = row?;
            let id = PlanId::parse(&id).map_err(|_| StoreError::Corrupt)?;
            let action = Action::parse(&action).map_err(|_| StoreError::Corrupt)?;
            out.push((id, action, Claim { pid, start_time: start as u64, boot_id: boot }));
        }
        Ok(out)
    }

    /// Stores a freshly sealed plan as pending, with its audit row.
    pub fn insert_plan(&self, plan: &Plan, audit: &AuditRow) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO plans (id, action, body, digest, requires_approval, requester, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                plan.id.as_str(),
                plan.action.as_str(),
                plan.canonical_json(),
                plan.digest.as_str(),
                plan.requires_approval,
                plan.requester,
                plan.created_at,
                plan.expires_at,
            ])?;
        self.audit(&plan.id, plan.action, audit)
    }

    /// Reads a plan and checks its body against its digest.
    pub fn load_plan(&self, id: &PlanId) -> Result<Option<StoredPlan>, StoreError> {
        let sql = format!("SELECT {PLAN_COLUMNS} FROM plans WHERE id = ?1");
        let mut statement = self.tx.prepare_cached(&sql)?;
        let row = statement
            .query_row([id.as_str()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, Option<i32>>(5)?,
                    r.get::<_, Option<i64>>(6)?,
                    r.get::<_, Option<String>>(7)?,
                    r.get::<_, Option<i64>>(8)?,
                    r.get::<_, Option<i64>>(9)?,
                    r.get::<_, Option<String>>(10)?,
                    r.get::<_, Option<String>>(11)?,
                    r.get::<_, Option<i64>>(12)?,
                ))
            })
            .optional()?;
        let Some((
            body,
            state,
            by,
            at,
            approved_digest,
            pid,
            start,
            boot,
            claimed_at,
            finished_at,
            outcome,
            resolved_by,
            resolved_at,
        )) = row
        else {
            return Ok(None);
        };
        let plan = Plan::from_stored(&body)?;
        if plan.id != *id {
            return Err(StoreError::Corrupt);
        }
        let approval = match (by, at, approved_digest) {
            (Some(by), Some(at), Some(digest)) => {
                Some(Approval { by, at, digest: Digest::parse(&digest).map_err(|_| StoreError::Corrupt)? })
            }
            _ => None,
        };
        let claim = match (pid, start, boot) {
            (Some(pid), Some(start), Some(boot_id)) => Some(Claim { pid, start_time: start as u64, boot_id }),
            _ => None,
        };
        Ok(Some(StoredPlan {
            plan,
            state: PlanState::parse(&state)?,
            approval,
            claim,
            claimed_at,
            finished_at,
            outcome: outcome.as_deref().map(PlanOutcome::parse).transpose()?,
            resolution: match (resolved_by, resolved_at) {
                (Some(by), Some(at)) => Some(Resolution { by, at }),
                _ => None,
            },
        }))
    }

    /// Records an approval on a pending, not yet approved plan.
    pub fn approve(
        &self,
        id: &PlanId,
        action: Action,
        digest: &Digest,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        let changed = self
            .tx
            .prepare_cached(
                "UPDATE plans SET approved_by = ?2, approved_at = ?3, approved_digest = ?4
                 WHERE id = ?1 AND state = 'pending' AND approved_by IS NULL AND digest = ?4",
            )?
            .execute(params![id.as_str(), audit.actor, audit.at, digest.as_str()])?;
        self.exactly_one(changed, id)?;
        self.audit(id, action, audit)
    }

    /// pending -> executing, recording the claimer.
    pub fn claim(
        &self,
        id: &PlanId,
        action: Action,
        claim: &Claim,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        let changed = self
            .tx
            .prepare_cached(
                "UPDATE plans SET state = 'executing', claim_pid = ?2, claim_start = ?3, claim_boot = ?4,
                 claimed_at = ?5 WHERE id = ?1 AND state = 'pending'",
            )?
            .execute(params![id.as_str(), claim.pid, claim.start_time as i64, claim.boot_id, audit.at])?;
        self.exactly_one(changed, id)?;
        self.audit(id, action, audit)
    }

    /// executing -> completed, failed (outcome rolled_back or not_started:
    /// nothing changed) or needs_inspection, only by the same claimer.
    pub fn finish(
        &self,
        id: &PlanId,
        action: Action,
        claim: &Claim,
        outcome: PlanOutcome,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        let state = match outcome {
            PlanOutcome::Completed => "completed",
            PlanOutcome::RolledBack | PlanOutcome::NotStarted => "failed",
            _ => "needs_inspection",
        };
        let changed = self
            .tx
            .prepare_cached(
                "UPDATE plans SET state = ?2, outcome = ?3, finished_at = ?4
                 WHERE id = ?1 AND state = 'executing' AND claim_pid = ?5 AND claim_start = ?6 AND claim_boot = ?7",
            )?
            .execute(params![
                id.as_str(),
                state,
                outcome.as_str(),
                audit.at,
                claim.pid,
                claim.start_time as i64,
                claim.boot_id
            ])?;
        self.exactly_one(changed, id)?;
        self.audit(id, action, audit)
    }

    /// executing -> needs_inspection for a claim whose process is gone.
    pub fn abandon(
        &self,
        id: &PlanId,
        action: Action,
        claim: &Claim,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        self.finish(id, action, claim, PlanOutcome::ClaimerDied, audit)
    }

    /// pending -> invalidated: the policy or the server changed under the
    /// plan, so its approval must never count again.
    pub fn invalidate(
        &self,
        id: &PlanId,
        action: Action,
        why: PlanOutcome,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        let changed = self
            .tx
            .prepare_cached(
                "UPDATE plans SET state = 'invalidated', outcome = ?2, finished_at = ?3 WHERE id = ?1 AND state = 'pending'",
            )?
            .execute(params![id.as_str(), why.as_str(), audit.at])?;
        self.exactly_one(changed, id)?;
        self.audit(id, action, audit)
    }

    /// needs_inspection -> inspected: an operator attests they looked at the
    /// server. Records who and when; the outcome column keeps why the plan
    /// needed inspection.
    pub fn resolve(&self, id: &PlanId, action: Action, audit: &AuditRow) -> Result<(), StoreError> {
        let changed = self
            .tx
            .prepare_cached(
                "UPDATE plans SET state = 'inspected', resolved_by = ?2, resolved_at = ?3
                 WHERE id = ?1 AND state = 'needs_inspection'",
            )?
            .execute(params![id.as_str(), audit.actor, audit.at])?;
        self.exactly_one(changed, id)?;
        self.audit(id, action, audit)
    }

    /// Forgets an app record (inside a resolving transaction), freeing its
    /// name, port and quota slot. Only the named row; nothing else.
    pub fn delete_app(&self, name: &str) -> Result<(), StoreError> {
        let changed = self.tx.prepare_cached("DELETE FROM apps WHERE name = ?1")?.execute([name])?;
        if changed == 1 { Ok(()) } else { Err(StoreError::Conflict(name.to_owned())) }
    }

    fn exactly_one(&self, changed: usize, id: &PlanId) -> Result<(), StoreError> {
        if changed == 1 { Ok(()) } else { Err(StoreError::Conflict(id.as_str().to_owned())) }
    }

    fn audit(&self, id: &PlanId, action: Action, row: &AuditRow) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO audit (at, event, plan_id, action, outcome, exit_code, duration_ms, actor)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                row.at,
                row.event.as_str(),
                id.as_str(),
                action.as_str(),
                row.outcome.as_str(),
                row.exit_code,
                row.duration_ms.map(|d| d as i64),
                row.actor,
            ])?;
        Ok(())
    }

    /// Every app we recorded.
    pub fn apps(&self) -> Result<BTreeMap<String, AppRecord>, StoreError> {
        let mut statement = self.tx.prepare_cached("SELECT name, state, record FROM apps")?;
        let rows = statement.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
        })?;
        let mut apps = BTreeMap::new();
        for row in rows {
            let (name, state, record) = row?;
            let record: AppRecord = serde_json::from_str(&record).map_err(|_| StoreError::Corrupt)?;
            if record.app != name || record.state.as_str() != state {
                return Err(StoreError::Corrupt);
            }
            apps.insert(name, record);
        }
        Ok(apps)
    }

    /// Inserts or replaces an app record (inside a finishing transaction).
    pub fn put_app(&self, record: &AppRecord, now: i64) -> Result<(), StoreError> {
        let body = serde_json::to_string(record).map_err(|_| StoreError::Corrupt)?;
        self.tx
            .prepare_cached(
                "INSERT INTO apps (name, state, host_port, record, plan_id, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (name) DO UPDATE SET state = excluded.state, host_port = excluded.host_port,
                 record = excluded.record, plan_id = excluded.plan_id, updated_at = excluded.updated_at",
            )?
            .execute(params![
                record.app,
                record.state.as_str(),
                record.host_port,
                body,
                record.plan_id.as_str(),
                now
            ])?;
        Ok(())
    }

    /// The audit rows of one plan, oldest first.
    pub fn audit_of(&self, id: &PlanId) -> Result<Vec<AuditEntry>, StoreError> {
        let mut statement = self.tx.prepare_cached(
            "SELECT at, event, plan_id, action, outcome, exit_code, duration_ms, actor FROM audit
             WHERE plan_id = ?1 ORDER BY seq",
        )?;
        let rows = statement.query_map([id.as_str()], |r| {
            Ok(AuditEntry {
                at: r.get(0)?,
                event: r.get(1)?,
                plan_id: r.get(2)?,
                action: r.get(3)?,
                outcome: r.get(4)?,
                exit_code: r.get(5)?,
                duration_ms: r.get(6)?,
                actor: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests;

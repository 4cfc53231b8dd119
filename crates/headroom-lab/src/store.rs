//! Every run of a lab in one SQLite file, so that a lab started again skips the runs already
//! stored and the tables can be made (again) from the file alone.
//!
//! Schema (version 1, in `PRAGMA user_version`):
//!
//! - `experiments(id, name UNIQUE, spec_json, created_at)`: one row per experiment name, with the
//!   experiment file's canonical JSON (object keys sorted) as it was when the first run was stored.
//! - `configurations(id, experiment_id, factors_json, UNIQUE(experiment_id, factors_json))`: one
//!   row per configuration (factor name -> level), as canonical JSON (keys sorted).
//! - `runs(id, configuration_id, repetition, status_json, started_at, duration_s, metrics_json,
//!   summary_json, UNIQUE(configuration_id, repetition))`.
//! - `intervals(run_id, idx, json)` and `samples(run_id, idx, json)`: one row per load interval
//!   and per server sample of a run.
//!
//! The database runs in WAL mode with foreign keys on; deleting an experiment deletes its
//! configurations, runs, intervals and samples (`ON DELETE CASCADE`).
//!
//! Numbers go through JSON (metrics, summaries, intervals, samples). serde_json writes every
//! finite `f64` with its shortest exact representation; reading it back is exact only with
//! serde_json's `float_roundtrip` feature (without it a value may come back one unit in the last
//! place off). Non-finite numbers have no JSON representation: a metric that is NaN or infinite
//! is stored as `null` and read back as NaN (tables skip it).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::intervals::LabInterval;

/// A configuration: factor name -> level.
pub type Factors = BTreeMap<String, String>;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum RunStatus {
    /// The load ran against a server that stayed up to the end.
    Ok,
    /// The server failed to start, never became ready, or died mid-run.
    ServerFailed { reason: String, stderr_tail: String },
    /// The load could not run.
    LoadFailed { reason: String },
}

impl RunStatus {
    pub fn is_ok(&self) -> bool {
        matches!(self, RunStatus::Ok)
    }
}

/// One repetition of one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub factors: Factors,
    /// 1-based.
    pub repetition: u32,
    pub status: RunStatus,
    /// RFC 3339.
    pub started_at: String,
    pub duration_s: f64,
    /// Figures tables are made from, e.g. "throughput_rps", "latency_p99_ms",
    /// "server_cpu_user_pct", "errors_total".
    pub metrics: BTreeMap<String, f64>,
    /// headroom's summary.json of the run (null for failed runs).
    pub summary: serde_json::Value,
    /// Its load intervals (intervals.jsonl lines, each with its probe).
    pub intervals: Vec<LabInterval>,
    /// One JSON object per server sample (headroom_monitor::Sample serialised), same clock.
    pub samples: Vec<serde_json::Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Sql(#[from] rusqlite::Error),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// The experiment was stored from another version of the experiment file.
    #[error(
        "{db}: the runs stored for experiment '{name}' came from another version of the \
         experiment file (changed: {changed}); mixing them would compare runs of different \
         experiments. Either write this version's results to a new output directory, or run \
         again with --fresh to delete the stored runs of '{name}' and start over"
    )]
    SpecChanged {
        db: PathBuf,
        name: String,
        /// Where the two versions differ, e.g. "factors.sndbuf, repetitions".
        changed: String,
    },
    /// A run of this configuration and repetition is already stored. Runs are never replaced:
    /// a lab skips stored runs (see [`Store::has_run`]), so saving one twice is a bug.
    #[error("{db}: a run of configuration {factors} repetition {repetition} is already stored")]
    DuplicateRun {
        db: PathBuf,
        factors: String,
        repetition: u32,
    },
    #[error("{0}")]
    Other(String),
}

const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS experiments (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    spec_json TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS configurations (
    id INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    factors_json TEXT NOT NULL,
    UNIQUE (experiment_id, factors_json)
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    configuration_id INTEGER NOT NULL REFERENCES configurations(id) ON DELETE CASCADE,
    repetition INTEGER NOT NULL,
    status_json TEXT NOT NULL,
    started_at TEXT NOT NULL,
    duration_s REAL,
    metrics_json TEXT NOT NULL,
    summary_json TEXT NOT NULL,
    UNIQUE (configuration_id, repetition)
);
CREATE TABLE IF NOT EXISTS intervals (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS samples (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;
";

/// The lab's results database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (creating the schema if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path)?;
        // Another process (or a `sqlite3` shell) may hold the lock for a moment.
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
            return Err(StoreError::Other(format!(
                "{}: could not switch the database to WAL mode (journal mode is {mode})",
                path.display()
            )));
        }
        conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::Other(format!(
                "{}: the database has schema version {version}, written by a newer headroom \
                 (this one knows version {SCHEMA_VERSION})",
                path.display()
            )));
        }
        conn.execute_batch(&format!(
            "BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        ))?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The experiment id for `name`, creating the experiment on first use; `spec` is the
    /// experiment file's canonical JSON. Opening the same name with a different spec is
    /// [`StoreError::SpecChanged`]: the stored runs came from another version of the file, and
    /// the way on is a new output directory or `--fresh` (see [`Store::reset`]).
    pub fn experiment(&mut self, name: &str, spec: &serde_json::Value) -> Result<i64, StoreError> {
        let spec_json = canonical_json(spec);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let existing: Option<(i64, String)> = tx
            .query_row(
                "SELECT id, spec_json FROM experiments WHERE name = ?1",
                [name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let id = match existing {
            Some((id, stored)) if stored == spec_json => id,
            Some((_, stored)) => {
                let stored: serde_json::Value = serde_json::from_str(&stored)?;
                let mut changed = Vec::new();
                diff_paths(&stored, spec, "", &mut changed);
                if changed.is_empty() {
                    // Only the text differs (e.g. a number's last digit through a lossy parse).
                    changed.push("(the spec's text)".to_string());
                }
                const SHOWN: usize = 8;
                let more = changed.len().saturating_sub(SHOWN);
                changed.truncate(SHOWN);
                let mut changed = changed.join(", ");
                if more > 0 {
                    let _ = write!(changed, " and {more} more");
                }
                return Err(StoreError::SpecChanged {
                    db: self.path.clone(),
                    name: name.to_string(),
                    changed,
                });
            }
            None => {
                tx.execute(
                    "INSERT INTO experiments (name, spec_json, created_at)
                     VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                    params![name, spec_json],
                )?;
                tx.last_insert_rowid()
            }
        };
        tx.commit()?;
        Ok(id)
    }

    /// Deletes the experiment `name` with all its configurations, runs, intervals and samples
    /// (for `--fresh`); the next [`Store::experiment`] creates it anew with the spec it is given.
    /// Returns how many runs were deleted (0 when there was no such experiment).
    pub fn reset(&mut self, name: &str) -> Result<usize, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let runs: i64 = tx.query_row(
            "SELECT count(*) FROM runs r
             JOIN configurations c ON c.id = r.configuration_id
             JOIN experiments e ON e.id = c.experiment_id
             WHERE e.name = ?1",
            [name],
            |r| r.get(0),
        )?;
        tx.execute("DELETE FROM experiments WHERE name = ?1", [name])?;
        tx.commit()?;
        Ok(runs as usize)
    }

    /// True when this configuration's repetition already has a stored run, whatever its status.
    ///
    /// A failed run counts: a lab started again does not retry a configuration whose server
    /// failed or whose load could not run (it would most likely fail the same way, and the
    /// tables show the failure). To retry failures, start again with `--fresh`.
    pub fn has_run(
        &self,
        exp: i64,
        factors: &Factors,
        repetition: u32,
    ) -> Result<bool, StoreError> {
        let factors_json = serde_json::to_string(factors)?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM runs r
               JOIN configurations c ON c.id = r.configuration_id
               WHERE c.experiment_id = ?1 AND c.factors_json = ?2 AND r.repetition = ?3)",
        )?;
        let found: bool = stmt.query_row(params![exp, factors_json, repetition], |r| r.get(0))?;
        Ok(found)
    }

    /// How many runs of the experiment are stored (for "resuming: 12 of 36 runs done").
    pub fn count_runs(&self, exp: i64) -> Result<usize, StoreError> {
        let n: i64 = self.conn.query_row(
            "SELECT count(*) FROM runs r JOIN configurations c ON c.id = r.configuration_id
             WHERE c.experiment_id = ?1",
            [exp],
            |r| r.get(0),
        )?;
        Ok(n as usize)
    }

    /// Saves a run with its intervals and samples in one transaction: a crash or an error never
    /// leaves half a run, so a run is either stored whole (and skipped on resume) or not at all.
    ///
    /// Saving a configuration's repetition that is already stored is an error
    /// ([`StoreError::DuplicateRun`]) and changes nothing: stored runs are never replaced.
    /// Returns the run's id.
    pub fn save_run(&mut self, exp: i64, run: &RunRecord) -> Result<i64, StoreError> {
        let factors_json = serde_json::to_string(&run.factors)?;
        let status_json = serde_json::to_string(&run.status)?;
        let metrics_json = serde_json::to_string(&run.metrics)?;
        let summary_json = serde_json::to_string(&run.summary)?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let known: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM experiments WHERE id = ?1)",
            [exp],
            |r| r.get(0),
        )?;
        if !known {
            return Err(StoreError::Other(format!(
                "{}: no experiment with id {exp} (was it reset?)",
                self.path.display()
            )));
        }
        tx.execute(
            "INSERT OR IGNORE INTO configurations (experiment_id, factors_json) VALUES (?1, ?2)",
            params![exp, factors_json],
        )?;
        let config: i64 = tx.query_row(
            "SELECT id FROM configurations WHERE experiment_id = ?1 AND factors_json = ?2",
            params![exp, factors_json],
            |r| r.get(0),
        )?;
        let duplicate: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM runs WHERE configuration_id = ?1 AND repetition = ?2)",
            params![config, run.repetition],
            |r| r.get(0),
        )?;
        if duplicate {
            return Err(StoreError::DuplicateRun {
                db: self.path.clone(),
                factors: factors_json,
                repetition: run.repetition,
            });
        }
        tx.execute(
            "INSERT INTO runs (configuration_id, repetition, status_json, started_at, duration_s,
                               metrics_json, summary_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                config,
                run.repetition,
                status_json,
                run.started_at,
                run.duration_s,
                metrics_json,
                summary_json
            ],
        )?;
        let run_id = tx.last_insert_rowid();
        let intervals: Vec<serde_json::Value> = run.intervals.iter().map(|i| i.to_json()).collect();
        for (table, rows) in [("intervals", &intervals), ("samples", &run.samples)] {
            let mut stmt = tx.prepare_cached(&format!(
                "INSERT INTO {table} (run_id, idx, json) VALUES (?1, ?2, ?3)"
            ))?;
            for (idx, value) in rows.iter().enumerate() {
                stmt.execute(params![run_id, idx as i64, serde_json::to_string(value)?])?;
            }
        }
        tx.commit()?;
        Ok(run_id)
    }

    /// Every run of the experiment, in the order saved.
    pub fn runs(&self, exp: i64) -> Result<Vec<RunRecord>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT r.id, c.factors_json, r.repetition, r.status_json, r.started_at, r.duration_s,
                    r.metrics_json, r.summary_json
             FROM runs r JOIN configurations c ON c.id = r.configuration_id
             WHERE c.experiment_id = ?1
             ORDER BY r.id",
        )?;
        let rows = stmt
            .query_map([exp], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, u32>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<f64>>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, String>(7)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut runs = Vec::with_capacity(rows.len());
        for (id, factors, repetition, status, started_at, duration_s, metrics, summary) in rows {
            let metrics: BTreeMap<String, Option<f64>> = serde_json::from_str(&metrics)?;
            runs.push(RunRecord {
                factors: serde_json::from_str(&factors)?,
                repetition,
                status: serde_json::from_str(&status)?,
                started_at,
                // SQLite stores NaN as NULL.
                duration_s: duration_s.unwrap_or(f64::NAN),
                metrics: metrics
                    .into_iter()
                    .map(|(k, v)| (k, v.unwrap_or(f64::NAN)))
                    .collect(),
                summary: serde_json::from_str(&summary)?,
                // A row that is no interval line (a store edited by hand) is left out.
                intervals: self
                    .children("intervals", id)?
                    .into_iter()
                    .filter_map(LabInterval::read)
                    .collect(),
                samples: self.children("samples", id)?,
            });
        }
        Ok(runs)
    }

    fn children(&self, table: &str, run_id: i64) -> Result<Vec<serde_json::Value>, StoreError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT json FROM {table} WHERE run_id = ?1 ORDER BY idx"
        ))?;
        let texts = stmt
            .query_map([run_id], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        texts
            .iter()
            .map(|t| serde_json::from_str(t).map_err(StoreError::from))
            .collect()
    }
}

/// `value` as JSON text with every object's keys sorted, whatever serde_json's map order.
pub fn canonical_json(value: &serde_json::Value) -> String {
    fn write(out: &mut String, v: &serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(k.clone()).to_string());
                    out.push(':');
                    write(out, &map[k]);
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(out, item);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(&mut out, value);
    out
}

/// Paths (`a.b[2]`) where `old` and `new` differ, outermost first.
fn diff_paths(old: &serde_json::Value, new: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    use serde_json::Value;
    let join = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff_paths(x, y, &join(k), out),
                    (Some(_), None) => out.push(format!("{} (removed)", join(k))),
                    (None, Some(_)) => out.push(format!("{} (added)", join(k))),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff_paths(x, y, &format!("{at}[{i}]"), out);
            }
        }
        (a, b) if a == b => {}
        _ => out.push(if at.is_empty() {
            "the whole spec".to_string()
        } else {
            at.to_string()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let v = json!({"b": 1, "a": {"z": [1, {"y": 2, "x": 3}], "c": "s"}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":"s","z":[1,{"x":3,"y":2}]},"b":1}"#
        );
    }

    #[test]
    fn diff_paths_names_changed_added_and_removed_keys() {
        let old = json!({"factors": {"sndbuf": ["8k"], "poller": ["epoll"]}, "reps": 3, "x": 1});
        let new =
            json!({"factors": {"sndbuf": ["8k", "64k"], "poller": ["epoll"]}, "reps": 5, "y": 1});
        let mut out = Vec::new();
        diff_paths(&old, &new, "", &mut out);
        assert_eq!(
            out,
            ["factors.sndbuf", "reps", "x (removed)", "y (added)"].map(String::from)
        );
    }
}

//! Database endpoints' backend (API stub; implementation in progress): a pool of `pool`
//! connections to SQLite (embedded) or PostgreSQL, with a `subscriber` table.

use std::sync::Arc;

/// A database behind a connection pool. Calls block until a pooled connection is free.
pub trait Db: Send + Sync {
    /// `n` reads of random rows of `subscriber`; returns the rows read.
    fn read(&self, n: u32) -> Result<u64, DbError>;
    /// `n` inserts into `subscriber`; returns the rows written.
    fn write(&self, n: u32) -> Result<u64, DbError>;
    /// Connections in the pool.
    fn pool_size(&self) -> usize;
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DbError(pub String);

/// Open `url` (`sqlite:PATH` or `postgres://...`) with a pool of `pool` connections, creating
/// and filling the `subscriber` table when missing.
pub fn open(url: &str, pool: usize) -> Result<Arc<dyn Db>, DbError> {
    Err(DbError(format!(
        "database support is not built yet: {url} (pool {pool})"
    )))
}

//! `file` steps (Tsung's fs plugin): operations on the local file system, under the workload's
//! file root, run by the user's session itself — there is no connection.
//!
//! Each operation is a blocking system call made on the worker's thread, timed around it under
//! the step's name (its latency also goes to the run's, and it counts as a request and, when it
//! succeeds, a response), then the session yields so that the worker serves its other users
//! between two operations. On a local disk these calls take microseconds; on a slow network
//! file system the worker waits with them, which is what such a benchmark measures.
//!
//! Paths are relative to the root; with their variables in they are checked again (no absolute
//! path, no `..`, no NUL: `escapes`, not run). Failures are counted by why in the `file`
//! counters and fail the step's name; the session goes on, as Tsung's does. As in Tsung, a
//! directory or link that exists already is counted (`already_exists`) but is no failure, and
//! a chunk read at the end of the file reads nothing and starts the file over.
//!
//! Nothing is allocated per operation once warm: the path is built in a reused buffer, writes
//! come from one block of random bytes made at the first write, reads go into the same block.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::time::Instant;

use headroom_core::session::{file_path_problem, FileAction, FileOp, Template};
use headroom_core::{ErrorKind, ProtoCounter};
use headroom_metrics::{micros, Recorder};
use rand::rngs::SmallRng;
use rand::RngCore;

/// The block writes are cut from and reads go into.
const BLOCK: usize = 64 << 10;

/// A user's file state: its open file and reused buffers.
#[derive(Default)]
pub(crate) struct Files {
    open: Option<File>,
    path: String,
    link: String,
    block: Vec<u8>,
}

/// Why an operation failed, as counted.
enum Failure {
    Io(io::Error),
    NotOpen,
    Escapes,
}

impl Files {
    /// A new session: the file left open by the last one is closed.
    pub fn reset(&mut self) {
        self.open = None;
    }

    /// Runs `op` under `root` with the session's `vars`, recording it in `rec`.
    pub fn run(
        &mut self,
        root: &str,
        op: &FileOp,
        vars: &[String],
        rng: &mut SmallRng,
        rec: &mut Recorder,
    ) {
        let start = Instant::now();
        let done = self.perform(root, &op.action, vars, rng, rec);
        let us = micros(start.elapsed());
        let c = &mut rec.counters;
        c.proto(ProtoCounter::FileOps, 1);
        c.requests += 1;
        match done {
            Ok(()) => {
                c.responses += 1;
                rec.record_latency(us, us);
                rec.record_name(op.name as usize, us, false);
            }
            Err(f) => {
                let counter = match &f {
                    Failure::NotOpen => ProtoCounter::FileNotOpen,
                    Failure::Escapes => ProtoCounter::FileEscapes,
                    Failure::Io(e) => io_counter(e),
                };
                c.proto(counter, 1);
                c.error(ErrorKind::Other);
                rec.name_error(op.name as usize);
            }
        }
    }

    /// Expands `t` (a path relative to the root) into `into` as `root/path`, refusing one
    /// that would leave the root.
    fn path_into(
        root: &str,
        t: &Template,
        vars: &[String],
        into: &mut String,
    ) -> Result<(), Failure> {
        into.clear();
        into.push_str(root);
        if !into.ends_with('/') {
            into.push('/');
        }
        let at = into.len();
        t.expand_into(vars, into);
        match file_path_problem(&into[at..]) {
            Some(_) => Err(Failure::Escapes),
            None => Ok(()),
        }
    }

    /// The random block, made once.
    fn block(&mut self, rng: &mut SmallRng) -> &mut [u8] {
        if self.block.is_empty() {
            self.block.resize(BLOCK, 0);
            rng.fill_bytes(&mut self.block);
        }
        &mut self.block
    }

    fn perform(
        &mut self,
        root: &str,
        action: &FileAction<Template>,
        vars: &[String],
        rng: &mut SmallRng,
        rec: &mut Recorder,
    ) -> Result<(), Failure> {
        let c = &mut rec.counters;
        let io = Failure::Io;
        match action {
            FileAction::MakeDir(p) | FileAction::Symlink { link: p, .. } => {
                Self::path_into(root, p, vars, &mut self.path)?;
                let made = match action {
                    FileAction::Symlink { target, .. } => {
                        // The link points at the target's full path: under the root too.
                        Self::path_into(root, target, vars, &mut self.link)?;
                        std::os::unix::fs::symlink(&self.link, &self.path)
                    }
                    _ => fs::create_dir(&self.path),
                };
                match made {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        // Tsung logs it and goes on: the directory (or link) is there.
                        c.proto(ProtoCounter::FileAlreadyExists, 1);
                        Ok(())
                    }
                    r => r.map_err(io),
                }
            }
            FileAction::RemoveDir(p) => {
                Self::path_into(root, p, vars, &mut self.path)?;
                fs::remove_dir(&self.path).map_err(io)
            }
            FileAction::Delete(p) => {
                Self::path_into(root, p, vars, &mut self.path)?;
                fs::remove_file(&self.path).map_err(io)
            }
            FileAction::Stat(p) => {
                Self::path_into(root, p, vars, &mut self.path)?;
                fs::metadata(&self.path).map(|_| ()).map_err(io)
            }
            FileAction::Read(p) => {
                Self::path_into(root, p, vars, &mut self.path)?;
                let mut f = File::open(&self.path).map_err(io)?;
                let block = self.block(rng);
                loop {
                    match f.read(block) {
                        Ok(0) => return Ok(()),
                        Ok(n) => rec.counters.proto(ProtoCounter::FileBytesRead, n as u64),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(io(e)),
                    }
                }
            }
            FileAction::Write { path, size } => {
                Self::path_into(root, path, vars, &mut self.path)?;
                let mut f = File::create(&self.path).map_err(io)?;
                let block = self.block(rng);
                write_bytes(&mut f, block, *size, rec)
            }
            FileAction::Open { path, write } => {
                self.open = None;
                Self::path_into(root, path, vars, &mut self.path)?;
                let f = if *write {
                    OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(&self.path)
                } else {
                    File::open(&self.path)
                };
                self.open = Some(f.map_err(io)?);
                Ok(())
            }
            FileAction::WriteChunk(size) => {
                if self.open.is_none() {
                    return Err(Failure::NotOpen);
                }
                self.block(rng);
                let (Some(f), block) = (self.open.as_mut(), &self.block) else {
                    return Err(Failure::NotOpen);
                };
                write_bytes(f, block, *size, rec)
            }
            FileAction::ReadChunk(size) => {
                if self.open.is_none() {
                    return Err(Failure::NotOpen);
                }
                self.block(rng);
                let (Some(f), block) = (self.open.as_mut(), &mut self.block) else {
                    return Err(Failure::NotOpen);
                };
                let mut left = *size;
                while left > 0 {
                    let n = left.min(block.len() as u64) as usize;
                    match f.read(&mut block[..n]) {
                        Ok(0) => {
                            // The end: as Tsung, the next chunk starts the file over.
                            f.seek(SeekFrom::Start(0)).map_err(io)?;
                            break;
                        }
                        Ok(got) => {
                            rec.counters.proto(ProtoCounter::FileBytesRead, got as u64);
                            left -= got as u64;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(io(e)),
                    }
                }
                Ok(())
            }
            // Dropped: closed (as Erlang's file:close, nothing is synced first).
            FileAction::Close => match self.open.take() {
                Some(_) => Ok(()),
                None => Err(Failure::NotOpen),
            },
        }
    }
}

/// Writes `size` bytes cut from `block` to `f`.
fn write_bytes(f: &mut File, block: &[u8], size: u64, rec: &mut Recorder) -> Result<(), Failure> {
    let mut left = size;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n]).map_err(Failure::Io)?;
        rec.counters.proto(ProtoCounter::FileBytesWritten, n as u64);
        left -= n as u64;
    }
    Ok(())
}

/// The counter of an I/O error.
fn io_counter(e: &io::Error) -> ProtoCounter {
    match e.kind() {
        io::ErrorKind::NotFound => ProtoCounter::FileNotFound,
        io::ErrorKind::PermissionDenied => ProtoCounter::FilePermissionDenied,
        io::ErrorKind::AlreadyExists => ProtoCounter::FileAlreadyExists,
        _ if matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) => {
            ProtoCounter::FileNoSpace
        }
        _ => ProtoCounter::FileOtherErrors,
    }
}

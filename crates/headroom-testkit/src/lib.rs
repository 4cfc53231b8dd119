//! What headroom's tests share (a dev-dependency only; nothing of it reaches the binary).
//!
//! [`CountingAlloc`]: a global allocator that forwards to the system's and counts every
//! allocation (`alloc`, `alloc_zeroed`, `realloc`; frees are not counted), per thread and per
//! process. A test binary that checks what a hot path allocates installs it once:
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: headroom_testkit::CountingAlloc = headroom_testkit::CountingAlloc;
//!
//! let before = headroom_testkit::thread_allocs();
//! // ... the code under test, on this thread ...
//! assert_eq!(headroom_testkit::thread_allocs() - before, 0);
//! ```
//!
//! [`thread_allocs`] counts the calling thread only, so tests running in parallel do not disturb
//! one another; [`process_allocs`] counts every thread (for code that runs on threads of its own,
//! such as the engine's workers; such tests must take turns).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counts allocations, then forwards to [`System`].
pub struct CountingAlloc;

thread_local! {
    static THREAD: Cell<u64> = const { Cell::new(0) };
}
static PROCESS: AtomicU64 = AtomicU64::new(0);

fn count() {
    PROCESS.fetch_add(1, Relaxed);
    // A const-initialised thread-local without a destructor: touching it never allocates or
    // re-enters the allocator (and `try_with` is a no-op while the thread is being torn down).
    let _ = THREAD.try_with(|c| c.set(c.get() + 1));
}

/// Allocations made so far by the calling thread.
pub fn thread_allocs() -> u64 {
    THREAD.with(Cell::get)
}

/// Allocations made so far by every thread of the process.
pub fn process_allocs() -> u64 {
    PROCESS.load(Relaxed)
}

// SAFETY: every call forwards to the system allocator with the same arguments; counting touches
// only an atomic and a const thread-local, neither of which allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[cfg(feature = "servers")]
pub mod servers;

//! Whom a user writes to: Tsung's `destination` attribute of chat messages (also used by
//! `iq:roster:add`, `presence:directed` and pubsub requests), as a pure helper over the caller's
//! record of which users are connected and online.
//!
//! Users are `{prefix}{N}` for `N` in `first..=last` (Tsung: `username` + an id in
//! `1..=userid_max`). Tsung keeps three sets in a global user server: *offline* (never connected,
//! or gone), *connected* (session open, no initial presence yet) and *online* (initial presence
//! sent, `presence:initial`; back to connected at `presence:final`). [`UserPool`] is the same as
//! two bitmaps (connected, online ⊆ connected) plus the round-robin cursors Tsung keeps; the
//! engine owns one (per worker, or shared by its own means) and updates it as users log in,
//! send initial presence and leave.

/// Tsung's destinations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Destination {
    /// An online user (initial presence sent) other than the sender, taken round-robin over the
    /// online users (one cursor shared by all senders, as Tsung's `get_online`), so successive
    /// messages spread over everyone online. None online: [`DestError::NoOnline`] (Tsung counts
    /// `error_no_online` and sends nothing).
    Online,
    /// A user who is not connected, round-robin over them (Tsung's `get_offline`): the message
    /// goes to offline storage. None: [`DestError::NoOffline`].
    Offline,
    /// Any user of the range, uniformly at random, whatever their state, possibly the sender
    /// (Tsung's `get_id`: `random:uniform(userid_max)`).
    Random,
    /// Always the same user: Tsung's `get_first`, the first user that connected; as Tsung hands
    /// ids out in order, that is `first`. Every sender writes to it: a hot spot.
    Unique,
    /// The destination of this user's previous chat message (Tsung's `previous`); the caller
    /// keeps it per user. None yet: [`DestError::NoPrevious`].
    Previous,
}

/// Why no destination could be picked (counted like Tsung's `error_no_online`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DestError {
    #[error("no other user is online")]
    NoOnline,
    #[error("no user is offline")]
    NoOffline,
    #[error("no previous destination")]
    NoPrevious,
    #[error("user id outside the pool's range")]
    OutOfRange,
    #[error("user id range too large (at most {MAX_USERS} ids)")]
    RangeTooLarge,
}

impl DestError {
    pub fn kind(self) -> &'static str {
        match self {
            DestError::NoOnline => "error_no_online",
            DestError::NoOffline => "error_no_offline",
            DestError::NoPrevious => "error_no_previous",
            DestError::OutOfRange | DestError::RangeTooLarge => "error_user_range",
        }
    }
}

/// Most ids in a pool: two bitmaps of 12.5 MB each.
pub const MAX_USERS: u64 = 100_000_000;

/// Which users of `first..=last` are connected and online, and the round-robin cursors.
#[derive(Debug, Clone)]
pub struct UserPool {
    first: u64,
    n: u64,
    connected: Vec<u64>,
    online: Vec<u64>,
    n_connected: u64,
    n_online: u64,
    online_cursor: u64,
    offline_cursor: u64,
}

impl UserPool {
    /// Everyone offline.
    pub fn new(first: u64, last: u64) -> Result<UserPool, DestError> {
        if last < first || last - first >= MAX_USERS {
            return Err(DestError::RangeTooLarge);
        }
        let n = last - first + 1;
        let words = n.div_ceil(64) as usize;
        Ok(UserPool {
            first,
            n,
            connected: vec![0; words],
            online: vec![0; words],
            n_connected: 0,
            n_online: 0,
            online_cursor: 0,
            offline_cursor: 0,
        })
    }

    pub fn first(&self) -> u64 {
        self.first
    }

    pub fn last(&self) -> u64 {
        self.first + self.n - 1
    }

    fn index(&self, id: u64) -> Result<u64, DestError> {
        let i = id.checked_sub(self.first).ok_or(DestError::OutOfRange)?;
        if i >= self.n {
            return Err(DestError::OutOfRange);
        }
        Ok(i)
    }

    fn get(bits: &[u64], i: u64) -> bool {
        bits.get((i / 64) as usize)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Sets bit `i`; returns whether it changed.
    fn put(bits: &mut [u64], i: u64, on: bool) -> bool {
        let Some(w) = bits.get_mut((i / 64) as usize) else {
            return false;
        };
        let m = 1u64 << (i % 64);
        let was = *w & m != 0;
        if on {
            *w |= m;
        } else {
            *w &= !m;
        }
        was != on
    }

    /// A user's session opened (`true`) or closed (`false`; also makes them not online).
    pub fn set_connected(&mut self, id: u64, on: bool) -> Result<(), DestError> {
        let i = self.index(id)?;
        if Self::put(&mut self.connected, i, on) {
            if on {
                self.n_connected += 1;
            } else {
                self.n_connected -= 1;
            }
        }
        if !on && Self::put(&mut self.online, i, false) {
            self.n_online -= 1;
        }
        Ok(())
    }

    /// A user sent initial presence (`true`) or unavailable presence (`false`). Online implies
    /// connected.
    pub fn set_online(&mut self, id: u64, on: bool) -> Result<(), DestError> {
        let i = self.index(id)?;
        if on {
            self.set_connected(id, true)?;
        }
        if Self::put(&mut self.online, i, on) {
            if on {
                self.n_online += 1;
            } else {
                self.n_online -= 1;
            }
        }
        Ok(())
    }

    pub fn is_connected(&self, id: u64) -> bool {
        self.index(id).is_ok_and(|i| Self::get(&self.connected, i))
    }

    pub fn is_online(&self, id: u64) -> bool {
        self.index(id).is_ok_and(|i| Self::get(&self.online, i))
    }

    pub fn online_count(&self) -> u64 {
        self.n_online
    }

    pub fn connected_count(&self) -> u64 {
        self.n_connected
    }

    /// The first index at or after `from` (wrapping around once) whose bit equals `want`, other
    /// than `skip`. Word at a time.
    fn next(bits: &[u64], n: u64, from: u64, want: bool, skip: Option<u64>) -> Option<u64> {
        if n == 0 {
            return None;
        }
        let from = from % n;
        let words = bits.len() as u64;
        // Scan words from `from`'s word, around, and back to it (its low part) again.
        for step in 0..=words {
            let wi = (from / 64 + step) % words;
            let mut w = bits.get(wi as usize).copied().unwrap_or(0);
            if !want {
                w = !w;
            }
            if step == 0 {
                w &= u64::MAX << (from % 64);
            } else if step == words {
                w &= !(u64::MAX << (from % 64));
            }
            while w != 0 {
                let i = wi * 64 + u64::from(w.trailing_zeros());
                w &= w - 1;
                if i >= n {
                    break;
                }
                if Some(i) != skip {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Picks the destination of a message from user `me`. `random` is a uniformly random `u64`
    /// from the caller's generator (used by [`Destination::Random`] only); `previous` is the
    /// caller's record of this user's previous destination. For Tsung parity the caller stores
    /// the returned id as the new `previous` after sending a chat message.
    pub fn pick(
        &mut self,
        dest: Destination,
        me: u64,
        random: u64,
        previous: Option<u64>,
    ) -> Result<u64, DestError> {
        match dest {
            Destination::Online => {
                let skip = self.index(me).ok();
                let i = Self::next(&self.online, self.n, self.online_cursor, true, skip)
                    .ok_or(DestError::NoOnline)?;
                self.online_cursor = i + 1;
                Ok(self.first + i)
            }
            Destination::Offline => {
                let i = Self::next(&self.connected, self.n, self.offline_cursor, false, None)
                    .ok_or(DestError::NoOffline)?;
                self.offline_cursor = i + 1;
                Ok(self.first + i)
            }
            Destination::Random => {
                // Lemire's multiply-shift: uniform enough for n << 2^64, no division.
                let i = ((u128::from(random) * u128::from(self.n)) >> 64) as u64;
                Ok(self.first + i)
            }
            Destination::Unique => Ok(self.first),
            Destination::Previous => previous.ok_or(DestError::NoPrevious),
        }
    }
}

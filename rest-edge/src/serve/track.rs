//! One connection's track: where it stands (requests in flight, a request head begun, its
//! last byte) for its header-read and idle deadlines and for admission's choice of an idle
//! connection to close, and the byte stream wrapper that keeps it.
//!
//! Must not: decide who is admitted (that is [`super::admission`]).

use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
#[cfg(test)]
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::HttpServerConfig;

/// Where one connection stands, for its header-read and idle deadlines.
pub(super) struct Track {
    state: Mutex<TrackState>,
    /// Woken when a request starts or ends (the deadline moves).
    pub(super) changed: Notify,
    /// Woken when admission asks this connection to close if it is idle.
    pub(super) close_if_idle: Notify,
}

struct TrackState {
    started: Instant,
    /// Requests whose answer is not yet complete.
    in_flight: usize,
    /// Requests whose head arrived.
    served: u64,
    /// The first byte of a request head not yet complete, on a kept-alive connection.
    head_since: Option<Instant>,
    /// The last byte read or written.
    last_activity: Instant,
    /// A byte of a request not yet started (its head incomplete) was read.
    head_started: bool,
    /// Asked to close if idle, not yet answered.
    asked: bool,
}

/// Why a connection was closed by its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expiry {
    HeaderRead,
    Idle,
}

impl Track {
    pub(super) fn new() -> Self {
        let now = Instant::now();
        Self {
            state: Mutex::new(TrackState {
                started: now,
                in_flight: 0,
                served: 0,
                head_since: None,
                last_activity: now,
                head_started: false,
                asked: false,
            }),
            changed: Notify::new(),
            close_if_idle: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TrackState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection got its place after waiting for it: its header-read and idle clocks
    /// start now. Nothing is read while it waits, so the wait is not the caller's silence.
    pub(super) fn admitted(&self) {
        let now = Instant::now();
        let mut s = self.lock();
        s.started = now;
        s.last_activity = now;
    }

    fn on_read(&self) {
        let now = Instant::now();
        let mut s = self.lock();
        s.last_activity = now;
        if s.in_flight == 0 {
            s.head_started = true;
            if s.served > 0 && s.head_since.is_none() {
                s.head_since = Some(now);
            }
        }
    }

    /// Since when this connection has been idle (nothing in flight, no request begun, not
    /// already asked to close); `None` when it is not.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        let s = self.lock();
        (s.in_flight == 0 && !s.head_started && !s.asked).then_some(s.last_activity)
    }

    /// Asks the connection to close if it is still idle when it looks.
    pub(super) fn ask_to_close(&self) {
        self.lock().asked = true;
        self.close_if_idle.notify_one();
    }

    /// Answers [`Track::ask_to_close`]: whether the connection is still idle, nothing waiting
    /// unread on its socket `fd` either, and so closes.
    pub(super) fn closes_when_asked(&self, fd: RawFd) -> bool {
        let mut s = self.lock();
        s.asked = false;
        s.in_flight == 0 && !s.head_started && !bytes_waiting(fd)
    }

    #[cfg(test)]
    pub(super) fn asked_to_close(&self) -> bool {
        self.lock().asked
    }

    /// Moves the connection's last activity `by` into the past.
    #[cfg(test)]
    pub(super) fn backdate(&self, by: Duration) {
        let mut s = self.lock();
        s.last_activity -= by;
        s.started -= by;
    }

    fn on_write(&self) {
        self.lock().last_activity = Instant::now();
    }

    pub(super) fn request_started(self: &Arc<Self>) -> InFlight {
        {
            let mut s = self.lock();
            s.in_flight += 1;
            s.served += 1;
            s.head_since = None;
            s.head_started = false;
            s.last_activity = Instant::now();
        }
        self.changed.notify_one();
        InFlight(Arc::clone(self))
    }

    /// When this connection is closed unless something happens first, and why; `None` while
    /// a request is in flight.
    pub(super) fn deadline(&self, conf: &HttpServerConfig) -> Option<(Instant, Expiry)> {
        let s = self.lock();
        if s.in_flight > 0 {
            None
        } else if s.served == 0 {
            Some((s.started + conf.header_read_timeout, Expiry::HeaderRead))
        } else if let Some(t) = s.head_since {
            Some((t + conf.header_read_timeout, Expiry::HeaderRead))
        } else {
            Some((s.last_activity + conf.idle_timeout, Expiry::Idle))
        }
    }
}

/// A request in flight; its end moves the connection's deadline.
pub(super) struct InFlight(Arc<Track>);

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut s = self.0.lock();
            s.in_flight -= 1;
            s.last_activity = Instant::now();
        }
        self.0.changed.notify_one();
    }
}

/// The connection's byte stream, noting every read and write in its [`Track`].
pub(super) struct TrackedIo<I> {
    pub(super) inner: I,
    pub(super) track: Arc<Track>,
}

impl<I: AsyncRead + Unpin> AsyncRead for TrackedIo<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.track.on_read();
        }
        r
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for TrackedIo<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.track.on_write();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.track.on_write();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Whether bytes the caller sent wait unread on socket `fd` (a peek that does not block).
fn bytes_waiting(fd: RawFd) -> bool {
    use nix::sys::socket::{recv, MsgFlags};
    let mut b = [0u8; 1];
    matches!(
        recv(fd, &mut b, MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT),
        Ok(n) if n > 0
    )
}

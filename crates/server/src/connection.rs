//! Connection: one client's socket, served by pgwire's message handling
//! under our own loop, so that every message is held to a size cap before
//! it is buffered (pgwire alone accepts a Query, Parse or Bind of up to
//! 1 GiB and buffers it whole).
//!
//! The frontend's bytes pass through [`Capped`], which follows the
//! protocol's framing (the startup packet: a length, then the packet; every
//! later message: a type byte, a length, then the body) and fails the read
//! as soon as a header announces more than the cap, before the body is
//! read. The loop then answers 54000 naming the message and its size and
//! closes the connection (reading and dropping what the client still sends
//! for up to a second, so the error is not lost to a reset); other clients
//! are not affected.
//!
//! Invariants: no frontend message longer than `message_bytes_max` is ever
//! handed to pgwire; what `Capped` counts is exactly the bytes it returned
//! (a body is skipped only by the bytes read of it); an SSL or GSSAPI
//! encryption request is refused ('N') before the startup packet, as a
//! server without TLS does.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use pgwire::api::{ClientInfo, DefaultClient, PgWireConnectionState, PgWireServerHandlers};
use pgwire::messages::PgWireFrontendMessage;
use pgwire::tokio::server::{PgWireMessageServerCodec, process_error, process_message};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

/// The largest frontend message accepted unless configured (a Query, a
/// Parse or a Bind with its parameters).
pub const MESSAGE_BYTES_MAX_DEFAULT: usize = 16 << 20;
/// The request codes of the 8-byte packets that ask for encryption.
const SSL_REQUEST_CODE: u32 = 80_877_103;
const GSSENC_REQUEST_CODE: u32 = 80_877_104;
/// Encryption requests refused before a client gives up asking.
const ENCRYPTION_REQUESTS_MAX: usize = 2;

/// A frontend message refused for its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge {
    /// The message's type byte (0 for the startup packet).
    pub(crate) kind: u8,
    pub(crate) length: usize,
    pub(crate) cap: usize,
}

/// Where the reader is in the frontend's framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Reading a header: `have` of its bytes so far (4 untyped, 5 typed).
    Header { have: usize },
    /// Skipping what is left of a body.
    Body { remaining: usize },
}

/// The frontend's bytes, held to a per-message cap as they are read.
#[derive(Debug)]
pub(crate) struct Capped<T> {
    inner: T,
    cap: usize,
    /// The first packet (startup) has no type byte; every later one has.
    typed: bool,
    frame: Frame,
    header: [u8; 5],
    refused: Option<TooLarge>,
}

impl<T> Capped<T> {
    pub(crate) fn new(inner: T, cap: usize) -> Capped<T> {
        Capped { inner, cap, typed: false, frame: Frame::Header { have: 0 }, header: [0; 5], refused: None }
    }

    /// The message that ended the connection for its size, if one did.
    pub(crate) fn refused(&self) -> Option<TooLarge> {
        self.refused
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Follows the framing over `bytes`, just read; the message refused, if any.
    fn follow(&mut self, mut bytes: &[u8]) -> Option<TooLarge> {
        while !bytes.is_empty() {
            match self.frame {
                Frame::Body { remaining } => {
                    let skipped = remaining.min(bytes.len());
                    bytes = &bytes[skipped..];
                    self.frame = match remaining - skipped {
                        0 => Frame::Header { have: 0 },
                        left => Frame::Body { remaining: left },
                    };
                }
                Frame::Header { have } => {
                    let size = if self.typed { 5 } else { 4 };
                    let taken = (size - have).min(bytes.len());
                    self.header[have..have + taken].copy_from_slice(&bytes[..taken]);
                    bytes = &bytes[taken..];
                    if have + taken < size {
                        self.frame = Frame::Header { have: have + taken };
                        continue;
                    }
                    let at = size - 4;
                    let kind = if self.typed { self.header[0] } else { 0 };
                    let field = [self.header[at], self.header[at + 1], self.header[at + 2], self.header[at + 3]];
                    let length = u32::from_be_bytes(field) as usize;
                    if length > self.cap {
                        return Some(TooLarge { kind, length, cap: self.cap });
                    }
                    // A length below 4 is pgwire's to refuse; the framing stops here.
                    let body = length.saturating_sub(4);
                    self.typed = true;
                    self.frame = if body == 0 { Frame::Header { have: 0 } } else { Frame::Body { remaining: body } };
                }
            }
        }
        None
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Capped<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        if let Some(refused) = self.refused {
            return Poll::Ready(Err(too_large_error(refused)));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let fresh = buf.filled()[before..].to_vec();
            if let Some(refused) = self.follow(&fresh) {
                self.refused = Some(refused);
                buf.set_filled(before);
                return Poll::Ready(Err(too_large_error(refused)));
            }
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Capped<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn too_large_error(refused: TooLarge) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{refused:?}"))
}

/// What a connection is held to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub(crate) message_bytes_max: usize,
    /// From the first packet to the end of authentication.
    pub(crate) startup_timeout_ms: u64,
}

/// Answers 'N' to the encryption requests that come before the startup
/// packet (no TLS here); false if the client went away.
async fn refuse_encryption(socket: &mut TcpStream) -> bool {
    for _ in 0..=ENCRYPTION_REQUESTS_MAX {
        let mut head = [0u8; 8];
        match socket.peek(&mut head).await {
            Ok(8) => {}
            Ok(_) | Err(_) => return true, // the startup path reports what is wrong
        }
        let (length, code) = (
            u32::from_be_bytes([head[0], head[1], head[2], head[3]]),
            u32::from_be_bytes([head[4], head[5], head[6], head[7]]),
        );
        if length != 8 || !matches!(code, SSL_REQUEST_CODE | GSSENC_REQUEST_CODE) {
            return true;
        }
        if socket.read_exact(&mut head).await.is_err() || socket.write_all(b"N").await.is_err() {
            return false;
        }
    }
    true
}

/// Serves one client until it leaves, errs fatally or breaks the cap.
pub(crate) async fn serve<H: PgWireServerHandlers>(mut socket: TcpStream, handlers: Arc<H>, limits: ConnectionLimits) {
    let Ok(addr) = socket.peer_addr() else { return };
    let _ = socket.set_nodelay(true);
    if !refuse_encryption(&mut socket).await {
        return;
    }
    let client: DefaultClient<_> = DefaultClient::new(addr, false);
    let mut framed = Framed::new(Capped::new(socket, limits.message_bytes_max), PgWireMessageServerCodec::new(client));
    framed.set_state(PgWireConnectionState::AwaitingStartup);
    let startup_deadline = tokio::time::sleep(Duration::from_millis(limits.startup_timeout_ms));
    tokio::pin!(startup_deadline);
    let (startup, simple, extended) =
        (handlers.startup_handler(), handlers.simple_query_handler(), handlers.extended_query_handler());
    let (copy, cancel) = (handlers.copy_handler(), handlers.cancel_handler());
    loop {
        let starting = matches!(
            framed.state(),
            PgWireConnectionState::AwaitingStartup | PgWireConnectionState::AuthenticationInProgress
        );
        let message = if starting {
            tokio::select! {
                _ = &mut startup_deadline => return refuse(framed.get_mut().get_mut(), "08P01", "the startup did not finish in time").await,
                message = framed.next() => message,
            }
        } else {
            framed.next().await
        };
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(error)) => return refuse_error(&mut framed, &error.to_string()).await,
            None => return,
        };
        if matches!(message, PgWireFrontendMessage::Terminate(_)) {
            return;
        }
        let is_extended = match framed.state() {
            PgWireConnectionState::CopyInProgress(is_extended) => is_extended,
            _ => message.is_extended_query(),
        };
        let is_cancel = matches!(message, PgWireFrontendMessage::CancelRequest(_));
        let processed = process_message(
            message,
            &mut framed,
            startup.clone(),
            simple.clone(),
            extended.clone(),
            copy.clone(),
            cancel.clone(),
        )
        .await;
        if let Err(error) = processed {
            let fatal = error.is_fatal();
            if process_error(&mut framed, error, is_extended).await.is_err() || fatal {
                return;
            }
        }
        if is_cancel {
            return;
        }
    }
}

/// Ends a connection whose bytes could not be read as messages: 54000 for
/// one past the cap, 08P01 for anything else.
async fn refuse_error<C>(framed: &mut Framed<Capped<TcpStream>, C>, error: &str) {
    let refused = framed.get_ref().refused();
    let socket = framed.get_mut().get_mut();
    match refused {
        Some(TooLarge { kind, length, cap }) => {
            let what =
                if kind == 0 { "the startup packet".to_owned() } else { format!("a '{}' message", kind as char) };
            let message =
                format!("{what} of {length} bytes is over the message cap of {cap} bytes (--message-bytes-max)");
            refuse(socket, "54000", &message).await;
        }
        None => refuse(socket, "08P01", &format!("invalid frontend message: {error}")).await,
    }
}

/// How long a refused client's remaining bytes are read and dropped after
/// its error is written: closing with unread bytes would reset the
/// connection, and the client could lose the error before reading it.
const LINGER_MS: u64 = 1_000;

/// Writes a FATAL error and closes the socket (after a bounded linger).
async fn refuse(socket: &mut TcpStream, code: &str, message: &str) {
    let _ = socket.write_all(&crate::pg::error_response("FATAL", code, message)).await;
    let _ = socket.shutdown().await;
    let mut sink = vec![0u8; 64 << 10];
    let drain = async { while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(Duration::from_millis(LINGER_MS), drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(kind: u8, body: usize) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend_from_slice(&((body + 4) as u32).to_be_bytes());
        out.extend(std::iter::repeat_n(b'x', body));
        out
    }

    fn startup(body: usize) -> Vec<u8> {
        let mut out = ((body + 4) as u32).to_be_bytes().to_vec();
        out.extend(std::iter::repeat_n(0u8, body));
        out
    }

    #[test]
    fn the_framing_is_followed_across_any_split_of_the_bytes() {
        let mut stream = startup(20);
        stream.extend(typed(b'Q', 100));
        stream.extend(typed(b'S', 0));
        stream.extend(typed(b'P', 1000));
        for split in [1, 2, 3, 5, 7, 64, stream.len()] {
            let mut capped = Capped::new((), 1004);
            for chunk in stream.chunks(split) {
                assert_eq!(capped.follow(chunk), None, "split {split}");
            }
            assert_eq!(capped.frame, Frame::Header { have: 0 }, "split {split}: at a message boundary");
        }
    }

    #[test]
    fn a_header_over_the_cap_is_refused_before_its_body() {
        let mut stream = startup(20);
        stream.extend(typed(b'Q', 10));
        stream.extend(typed(b'Q', 5000)[..5].to_vec());
        for split in [1, 4, 9, stream.len()] {
            let mut capped = Capped::new((), 1000);
            let refused = stream.chunks(split).find_map(|chunk| capped.follow(chunk));
            assert_eq!(refused, Some(TooLarge { kind: b'Q', length: 5004, cap: 1000 }), "split {split}");
        }
        let mut capped = Capped::new((), 1000);
        assert_eq!(capped.follow(&startup(2000)[..4]), Some(TooLarge { kind: 0, length: 2004, cap: 1000 }));
    }
}

//! Writing response frames to a client's socket: encoded bytes with
//! `write`, stored batches with `sendfile` from their segment file (page
//! cache to socket without passing through this process, as Kafka's
//! `FileRecords.writeTo` does), or, where that cannot apply (a storage
//! double's file, or a listener configured buffered), read into a buffer
//! and written.
//!
//! Invariants: the bytes sent are exactly the frames' (`Outgoing::len`,
//! asserted); a `sendfile` that sends part of a slice or would block is
//! resumed where it stopped once the socket is writable again; a segment
//! file that ends before its slice is an error that closes the connection,
//! never a short frame followed by others.

use std::fs::File;
use std::io;

use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;

use super::frame::Outgoing;

/// The most one `sendfile` call is asked to send (Linux sends at most
/// about 2 GiB at once anyway).
const SENDFILE_BYTES_MAX: usize = 1 << 30;
/// A connection's read buffer for the buffered path is given back when it
/// grew past this.
const SCRATCH_BYTES_KEPT_MAX: usize = 8 << 20;

/// Writes `out`'s frames: `zero_copy` sends stored batches with `sendfile`
/// where their file is a real one; `scratch` is the buffered path's buffer.
pub(crate) async fn send(
    writer: &mut OwnedWriteHalf,
    out: &Outgoing,
    zero_copy: bool,
    scratch: &mut Vec<u8>,
) -> io::Result<()> {
    let (mut at, mut sent) = (0, 0);
    for (position, slice) in &out.stored {
        writer.write_all(&out.bytes[at..*position]).await?;
        sent += *position - at;
        at = *position;
        match slice.os_file().filter(|_| zero_copy) {
            Some(file) => send_file(writer.as_ref(), file, slice.position(), slice.len()).await?,
            None => {
                scratch.clear();
                slice.read_into(scratch)?;
                writer.write_all(scratch).await?;
            }
        }
        sent += slice.len() as usize;
    }
    writer.write_all(&out.bytes[at..]).await?;
    sent += out.bytes.len() - at;
    assert_eq!(sent, out.len(), "the bytes sent are the frames'");
    if scratch.capacity() > SCRATCH_BYTES_KEPT_MAX {
        *scratch = Vec::new();
    }
    Ok(())
}

/// Sends `len` bytes of `file` from `position` to `stream`, resuming after
/// partial sends and whenever the socket would block.
async fn send_file(stream: &TcpStream, file: &File, position: u64, len: u64) -> io::Result<()> {
    let (mut offset, end) = (position, position + len);
    while offset < end {
        stream.writable().await?;
        let count = usize::try_from(end - offset).unwrap_or(usize::MAX).min(SENDFILE_BYTES_MAX);
        let before = offset;
        let sent = stream.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(stream, file, Some(&mut offset), count).map_err(io::Error::from)
        });
        match sent {
            Ok(0) => {
                let message = format!("a segment file ended at {offset}, before its batches' end {end}");
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, message));
            }
            Ok(n) => debug_assert_eq!(offset, before + n as u64),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    debug_assert_eq!(offset, end);
    Ok(())
}

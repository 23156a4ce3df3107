//! [`ObjectReader`]: a streaming read of an object, taken in chunks (the pipeline's
//! reads) or as an [`AsyncRead`]; a local file's also as blocking reads
//! ([`BlockingRead`]).

use tokio::io::AsyncRead;

/// A streaming read of an input, taken a chunk at a time ([`read_chunk`]) or as an
/// [`AsyncRead`] ([`into_async_read`]).
///
/// [`read_chunk`]: ObjectReader::read_chunk
/// [`into_async_read`]: ObjectReader::into_async_read
pub struct ObjectReader {
    body: Body,
    pub size: u64,
    /// The version of the object read, where the store says (every backend does).
    pub version: Option<crate::Version>,
}

enum Body {
    Stream(Box<dyn AsyncRead + Send + Unpin>),
    /// A local file, read on a blocking thread straight into the caller's chunk.
    /// tokio's `File` reads into a buffer of its own and copies that into the
    /// caller's: one copy of every input byte, 5% of a local run's instructions.
    /// What was read leaves the page cache ([`crate::local::OnceRead`]). `None`
    /// while a read holds it.
    File(Option<crate::local::OnceRead>),
}

impl ObjectReader {
    /// A read of `size` bytes from any stream.
    pub fn new(body: impl AsyncRead + Send + Unpin + 'static, size: u64) -> ObjectReader {
        ObjectReader {
            body: Body::Stream(Box::new(body)),
            size,
            version: None,
        }
    }

    /// A read of a local file of `size` bytes, from its current position.
    pub fn file(file: std::fs::File, size: u64) -> ObjectReader {
        ObjectReader {
            body: Body::File(Some(crate::local::OnceRead::new(file))),
            size,
            version: None,
        }
    }

    /// The same read, naming the version it reads.
    pub fn with_version(mut self, version: crate::Version) -> ObjectReader {
        self.version = Some(version);
        self
    }

    /// The rest of the object, whole (small objects).
    pub async fn read_all(&mut self) -> std::io::Result<bytes::Bytes> {
        let mut buf = bytes::BytesMut::with_capacity(usize::try_from(self.size).unwrap_or(0));
        while self.read_chunk(&mut buf).await? > 0 {}
        Ok(buf.freeze())
    }

    /// Appends the next bytes to `buf`, as many as its spare capacity holds (it
    /// grows by 64 KiB first if it has none); `0` at the end of the object.
    pub async fn read_chunk(&mut self, buf: &mut bytes::BytesMut) -> std::io::Result<usize> {
        use tokio::io::AsyncReadExt;
        make_room(buf);
        match &mut self.body {
            Body::Stream(r) => r.read_buf(buf).await,
            Body::File(slot) => {
                let Some(mut file) = slot.take() else {
                    return Err(std::io::Error::other("an earlier read was abandoned"));
                };
                let mut chunk = std::mem::take(buf);
                let (file, chunk, read) = tokio::task::spawn_blocking(move || {
                    let read = file.read(&mut chunk);
                    (file, chunk, read)
                })
                .await
                .map_err(std::io::Error::other)?;
                *slot = Some(file);
                *buf = chunk;
                read
            }
        }
    }

    /// A local file's reads as plain blocking calls, for a caller that reads on a
    /// thread of its own and uses each chunk there while it is still in that
    /// core's cache: SHA-256 of a chunk just read runs at the hash's own speed
    /// (`openssl dgst`'s), of one read on another core a third slower. `Err(self)`
    /// for a stream, and for a file whose read was abandoned.
    pub fn into_blocking(self) -> Result<BlockingRead, ObjectReader> {
        match self.body {
            Body::File(Some(file)) => Ok(BlockingRead { file }),
            body => Err(ObjectReader {
                body,
                size: self.size,
                version: self.version,
            }),
        }
    }

    /// The rest of the object as an [`AsyncRead`].
    pub fn into_async_read(self) -> Box<dyn AsyncRead + Send + Unpin> {
        match self.body {
            Body::Stream(r) => r,
            Body::File(Some(f)) => Box::new(tokio::fs::File::from_std(f.into_file())),
            Body::File(None) => Box::new(Abandoned),
        }
    }
}

/// A local file read with blocking calls ([`ObjectReader::into_blocking`]).
pub struct BlockingRead {
    file: crate::local::OnceRead,
}

impl BlockingRead {
    /// As [`ObjectReader::read_chunk`], on the calling thread.
    pub fn read_chunk(&mut self, buf: &mut bytes::BytesMut) -> std::io::Result<usize> {
        make_room(buf);
        self.file.read(buf)
    }
}

/// A full `buf` grows by 64 KiB: a read always has room for at least a byte.
fn make_room(buf: &mut bytes::BytesMut) {
    if buf.capacity() == buf.len() {
        buf.reserve(1 << 16);
    }
}

/// What is left of a file whose read was abandoned mid-way: an error, never an
/// end that would pass for the object's.
struct Abandoned;

impl AsyncRead for Abandoned {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Err(std::io::Error::other("an earlier read was abandoned")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::io::Write;
    use std::task::{Context, Waker};
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_read_dropped_mid_way_leaves_an_error_not_an_end() {
        // A pipe with nothing in it yet: a read of it blocks until a byte comes.
        let (rx, mut tx) = std::io::pipe().expect("pipe");
        let file = std::fs::File::from(std::os::fd::OwnedFd::from(rx));
        let mut reader = ObjectReader::file(file, 1);
        let mut buf = bytes::BytesMut::new();
        {
            let mut read = std::pin::pin!(reader.read_chunk(&mut buf));
            // One poll hands the file to the blocking read, which waits on the pipe.
            let polled = read.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            assert!(polled.is_pending());
        }
        // The read was dropped with the file: what is left must not look like an end.
        let again = reader.read_chunk(&mut buf).await.unwrap_err();
        assert!(again.to_string().contains("abandoned"), "{again}");
        let e = reader.into_async_read().read_u8().await.unwrap_err();
        assert!(e.to_string().contains("abandoned"), "{e}");
        // The blocking read ends once a byte comes, so the runtime can shut down.
        tx.write_all(b"x").expect("write to the pipe");
    }
}

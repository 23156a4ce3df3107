//! A local file read once, start to end: the pipeline's reads of an input and of a
//! published object. Straight into the caller's chunk, and what was read is dropped
//! from the page cache behind the reader.
//!
//! Why drop: a landing or a `verify --deep` reads each byte once, so caching it only
//! grows the page cache, which a pod's memory cgroup is charged for and which the
//! kernel must then reclaim. On the 2-core bench VM a cold read of a 9.7 GB file
//! took 10.3 to 15.1 s with 7.4 to 13.4 s of system CPU through the page cache, and
//! 4.4 s with 0.9 s dropping behind (`dd iflag=nocache`, which does the same).

use std::fs::File;
use std::io;

/// Bytes read between two drops: large enough that the advice costs nothing, small
/// enough that the cache never holds much of the file (as the staging writer's step).
const DROP_EVERY: u64 = 8 << 20;

/// A local file read once, from its position when opened to its end.
pub(crate) struct OnceRead {
    file: File,
    /// Offset of the next read.
    at: u64,
    /// Offset from which the pages read are still cached.
    kept_from: u64,
}

impl OnceRead {
    pub(crate) fn new(mut file: File) -> OnceRead {
        use std::io::Seek;
        // A pipe has no position (and takes no advice): nothing is ever dropped.
        let at = file.stream_position().unwrap_or(0);
        advise(&file, 0, 0, Advice::Sequential);
        OnceRead {
            file,
            at,
            kept_from: at,
        }
    }

    /// One `read(2)` into the spare capacity of `buf` (which the caller made
    /// non-empty), without zeroing it first; the bytes read.
    pub(crate) fn read(&mut self, buf: &mut bytes::BytesMut) -> io::Result<usize> {
        let n = read_spare(&self.file, buf)?;
        self.at += n as u64;
        if self.at - self.kept_from >= DROP_EVERY || (n == 0 && self.at > self.kept_from) {
            let len = self.at - self.kept_from;
            advise(&self.file, self.kept_from, len, Advice::DontNeed);
            self.kept_from = self.at;
        }
        Ok(n)
    }

    pub(crate) fn into_file(self) -> File {
        self.file
    }
}

enum Advice {
    Sequential,
    DontNeed,
}

/// `posix_fadvise(2)`: advice only, so a failure (a pipe, a file system that takes
/// none) changes nothing and is ignored. A `len` of 0 means to the end.
#[cfg(target_os = "linux")]
fn advise(file: &File, offset: u64, len: u64, advice: Advice) {
    use std::os::fd::AsRawFd;
    let advice = match advice {
        Advice::Sequential => libc::POSIX_FADV_SEQUENTIAL,
        Advice::DontNeed => libc::POSIX_FADV_DONTNEED,
    };
    let (Ok(offset), Ok(len)) = (
        libc::off64_t::try_from(offset),
        libc::off64_t::try_from(len),
    ) else {
        return;
    };
    // SAFETY: a plain syscall on our own open descriptor; it only drops clean cached
    // pages or sets readahead, never changes the file's contents.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), offset, len, advice);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_file: &File, _offset: u64, _len: u64, _advice: Advice) {}

/// One `read(2)` of `file` into the spare capacity of `buf` (which the caller
/// made non-empty), without zeroing it first; the bytes read.
fn read_spare(file: &File, buf: &mut bytes::BytesMut) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let spare = buf.spare_capacity_mut();
    let (ptr, room) = (spare.as_mut_ptr(), spare.len());
    loop {
        // SAFETY: `ptr` and `room` are the spare capacity of `buf`, borrowed
        // mutably here; read(2) writes at most `room` bytes there.
        let n = unsafe { libc::read(file.as_raw_fd(), ptr.cast(), room) };
        match usize::try_from(n) {
            Ok(n) => {
                // SAFETY: read(2) initialised the first `n <= room` spare bytes.
                unsafe { buf.set_len(buf.len() + n) };
                return Ok(n);
            }
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Reads from the file's position to its end, whatever the chunk sizes and
    /// however many drops happen on the way: the bytes are the file's.
    #[test]
    fn reads_every_byte_from_the_position_across_drops() {
        let mut tmp = tempfile::tempfile().expect("temp file");
        // 20 MiB + 7 bytes: two drops on the way and a last partial one at the end.
        let content: Vec<u8> = (0..(20u64 << 20) + 7).map(|i| (i % 251) as u8).collect();
        tmp.write_all(&content).expect("write");
        use std::io::{Seek, SeekFrom};
        tmp.seek(SeekFrom::Start(5)).expect("seek");
        let mut r = OnceRead::new(tmp);
        assert_eq!(r.at, 5);
        let mut got = Vec::new();
        loop {
            let mut buf = bytes::BytesMut::with_capacity(3 << 20);
            let n = r.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf);
        }
        assert_eq!(got, content[5..]);
        assert_eq!(r.kept_from, content.len() as u64, "the end drops the rest");
    }
}

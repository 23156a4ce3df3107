//! A promotion's label on a local lake ([`crate::Staged::label`]): the extended
//! attribute `user.landing.label`, set on the temp file before its rename, so it
//! comes into place with the bytes and goes with them when they are replaced.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::LABEL_MAX;

const ATTR: &[u8] = b"user.landing.label\0";

/// Set the label of the file at `path`: `Ok(false)` where its filesystem keeps no
/// user attributes (tmpfs before Linux 6.6, some network filesystems).
pub(super) fn set(path: &Path, label: &str) -> io::Result<bool> {
    let p = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: the path and the name are NUL-terminated; the value is read for its
    // length only.
    let rc = unsafe {
        libc::setxattr(
            p.as_ptr(),
            ATTR.as_ptr().cast(),
            label.as_ptr().cast(),
            label.len(),
            0,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOTSUP) => Ok(false),
        _ => Err(e),
    }
}

/// The label of the open `file`; `None` if it has none (or its filesystem keeps
/// none). Read through the descriptor, so it belongs to the file just stat'ed.
pub(super) fn get(file: &File) -> io::Result<Option<String>> {
    let mut buf = vec![0u8; LABEL_MAX + 1];
    // SAFETY: the descriptor is open for the call; the buffer is writable for its
    // whole length.
    let n = unsafe {
        libc::fgetxattr(
            file.as_raw_fd(),
            ATTR.as_ptr().cast(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        // ERANGE: longer than any label this job writes, so not one of its labels.
        return match e.raw_os_error() {
            Some(libc::ENODATA | libc::ENOTSUP | libc::ERANGE) => Ok(None),
            _ => Err(e),
        };
    }
    buf.truncate(usize::try_from(n).unwrap_or(0));
    Ok(String::from_utf8(buf).ok())
}

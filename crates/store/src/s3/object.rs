//! Whole objects: the input's streaming read, heads, small objects (checkpoint,
//! lease) with their write conditions, deletes.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use bytes::Bytes;
use tokio::io::{AsyncRead, ReadBuf};

use super::error::{content_length, map_err, protocol, Cond};
use super::{decode_label, S3Store, LABEL_META, RUN_ID_META};
use crate::{ObjectMeta, ObjectReader, PutMode, Version};
use landing_error::{Error, Result};

impl S3Store {
    /// [`crate::Store::read`]: one streaming `GetObject`, ranged past `offset`.
    pub(super) async fn read_object(&self, key: &str, offset: u64) -> Result<ObjectReader> {
        let full = self.full_key(key);
        let loc = self.loc_full(&full);
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&full)
            .set_range((offset > 0).then(|| format!("bytes={offset}-")))
            .send()
            .await
            .map_err(|e| map_err("GetObject", &loc, e, Cond::None))?;
        // A ranged GET is answered 206 with `Content-Range: bytes {offset}-…`; a
        // server that ignores Range sends the whole object (200), which must not be
        // taken for the rest of it.
        let ranged = out
            .content_range()
            .is_some_and(|r| r.starts_with(&format!("bytes {offset}-")));
        if offset > 0 && !ranged {
            return Err(protocol(
                "GetObject",
                &loc,
                "a ranged read was answered without its Content-Range",
            ));
        }
        let size = content_length(out.content_length(), "GetObject", &loc)?;
        let version = Version::ETag(
            out.e_tag()
                .ok_or_else(|| protocol("GetObject", &loc, "answer carries no ETag"))?
                .to_owned(),
        );
        let body = StallTimeout::new(
            Box::pin(out.body.into_async_read()),
            self.cfg.read_timeout,
            loc,
        );
        Ok(ObjectReader::new(body, size).with_version(version))
    }

    pub(super) async fn head_object(&self, key: &str) -> Result<Option<ObjectMeta>> {
        Ok(self.head_labelled(key).await?.map(|(meta, _)| meta))
    }

    /// [`crate::Lake::labelled`]: a HEAD, with the label from the user metadata.
    pub(super) async fn head_labelled(
        &self,
        key: &str,
    ) -> Result<Option<(ObjectMeta, Option<String>)>> {
        let full = self.full_key(key);
        let loc = self.loc_full(&full);
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(&full)
            .send()
            .await
        {
            Ok(out) => {
                let meta = ObjectMeta {
                    size: content_length(out.content_length(), "HeadObject", &loc)?,
                    version: Version::ETag(
                        out.e_tag()
                            .ok_or_else(|| protocol("HeadObject", &loc, "answer carries no ETag"))?
                            .to_owned(),
                    ),
                };
                let label = out
                    .metadata()
                    .and_then(|m| m.get(LABEL_META))
                    .and_then(|v| decode_label(v));
                Ok(Some((meta, label)))
            }
            Err(e) => match map_err("HeadObject", &loc, e, Cond::None) {
                Error::NotFound { .. } => Ok(None),
                e => Err(e),
            },
        }
    }

    pub(super) async fn put_small_object(
        &self,
        key: &str,
        body: Bytes,
        mode: &PutMode,
    ) -> Result<Version> {
        let full = self.full_key(key);
        let loc = self.loc_full(&full);
        self.gate.before_write(key, &loc)?;
        let req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(&full)
            .content_length(body.len() as i64)
            .body(ByteStream::from(body));
        let (req, c) = conditioned!(req, mode).map_err(|e| protocol("PutObject", &loc, e))?;
        let out = req
            .send()
            .await
            .map_err(|e| map_err("PutObject", &loc, e, c))?;
        out.e_tag()
            .map(|e| Version::ETag(e.to_owned()))
            .ok_or_else(|| protocol("PutObject", &loc, "answer carries no ETag"))
    }

    /// Delete `key`; absent is fine.
    pub(super) async fn delete_object(&self, key: &str) -> Result<()> {
        let full = self.full_key(key);
        let loc = self.loc_full(&full);
        match self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(&full)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => match map_err("DeleteObject", &loc, e, Cond::None) {
                Error::NotFound { .. } => Ok(()),
                e => Err(e),
            },
        }
    }
}

/// Does `key` (a full key) hold an object of `size` bytes written by run `run_id`
/// (its user metadata)? Its size and ETag if so: how a write whose answer was lost
/// is told apart from another's.
pub(super) async fn runs_object(
    client: &Client,
    bucket: &str,
    key: &str,
    run_id: &str,
    size: u64,
    loc: &str,
) -> Result<Option<ObjectMeta>> {
    let out = match client.head_object().bucket(bucket).key(key).send().await {
        Ok(out) => out,
        Err(e) => {
            return match map_err("HeadObject", loc, e, Cond::None) {
                Error::NotFound { .. } => Ok(None),
                e => Err(e),
            }
        }
    };
    let ours = !run_id.is_empty()
        && out.content_length() == Some(size as i64)
        && out
            .metadata()
            .and_then(|m| m.get(RUN_ID_META))
            .map(String::as_str)
            == Some(run_id);
    if !ours {
        return Ok(None);
    }
    let etag = out
        .e_tag()
        .ok_or_else(|| protocol("HeadObject", loc, "answer carries no ETag"))?;
    Ok(Some(ObjectMeta {
        size,
        version: Version::ETag(etag.to_owned()),
    }))
}

/// A streaming body that fails a read stalled longer than `timeout`: the SDK bounds
/// requests, not the consumption of a streaming body.
struct StallTimeout {
    inner: Pin<Box<dyn AsyncRead + Send>>,
    timeout: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    armed: bool,
    location: String,
}

impl StallTimeout {
    fn new(inner: Pin<Box<dyn AsyncRead + Send>>, timeout: Duration, location: String) -> Self {
        StallTimeout {
            inner,
            timeout,
            timer: Box::pin(tokio::time::sleep(timeout)),
            armed: false,
            location,
        }
    }
}

impl AsyncRead for StallTimeout {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.inner.as_mut().poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.armed = false;
                Poll::Ready(result)
            }
            Poll::Pending => {
                if !this.armed {
                    let deadline = tokio::time::Instant::now() + this.timeout;
                    this.timer.as_mut().reset(deadline);
                    this.armed = true;
                }
                match this.timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "reading {} stalled for more than {} s",
                            this.location,
                            this.timeout.as_secs_f64()
                        ),
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3::S3Options;
    use crate::Store;
    use aws_sdk_s3::config::Region;

    /// Read one HTTP request's head from `sock`; false if the client hung up first.
    fn read_request(sock: &mut std::net::TcpStream) -> bool {
        use std::io::Read;
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match sock.read(&mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        true
    }

    /// A store that talks to a hand-made socket at `addr` instead of a server.
    fn store_at(addr: std::net::SocketAddr, cfg: S3Options) -> S3Store {
        let sdk = aws_config::SdkConfig::builder()
            .endpoint_url(format!("http://{addr}"))
            .region(Region::from_static("us-east-1"))
            .credentials_provider(aws_sdk_s3::config::SharedCredentialsProvider::new(
                aws_sdk_s3::config::Credentials::new("test", "test", None, None, "test"),
            ))
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        let cfg = S3Options {
            force_path_style: true,
            ..cfg
        };
        S3Store::from_sdk_config(&sdk, "bucket", "lake", &cfg)
    }

    /// A small object whose body breaks after the response head (which the SDK does
    /// not retry) is read again: the second answer is whole.
    #[tokio::test]
    async fn a_small_read_whose_body_breaks_is_repeated() {
        use std::io::Write;

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let answers: [&[u8]; 2] = [
                // The head promises 10 bytes; the connection closes after 3.
                b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nETag: \"e\"\r\n\r\n012",
                b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nETag: \"e\"\r\n\r\n0123456789",
            ];
            for answer in answers {
                let (mut sock, _) = listener.accept().expect("accept");
                if !read_request(&mut sock) {
                    return;
                }
                sock.write_all(answer).expect("answer");
            }
        });
        let cfg = S3Options {
            max_attempts: 1,
            ..S3Options::default()
        };
        let store = store_at(addr, cfg);
        let got = crate::get_small(&store, "locks/progress/a.jsonl.lock")
            .await
            .expect("the second read is whole")
            .expect("present");
        assert_eq!(&got.bytes[..], b"0123456789");
        assert_eq!(got.version, Version::ETag("\"e\"".into()));
        tokio::task::spawn_blocking(move || server.join())
            .await
            .expect("join")
            .expect("server thread");
    }

    /// A body that stops arriving fails the read after `read_timeout`, instead of
    /// hanging until the SDK's stalled-stream protection (if ever). The server is a
    /// socket that answers GetObject with 10 of 100 promised bytes, then stays silent
    /// until the client hangs up.
    #[tokio::test]
    async fn a_stalled_body_fails_the_read_with_a_timeout() {
        use std::io::{Read, Write};
        use tokio::io::AsyncReadExt;

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let (mut sock, _) = listener.accept().expect("accept");
            if !read_request(&mut sock) {
                return;
            }
            sock.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nETag: \"e\"\r\n\r\n0123456789",
            )
            .expect("answer");
            // Silent until the client closes the connection.
            let mut buf = [0u8; 4096];
            while matches!(sock.read(&mut buf), Ok(n) if n > 0) {}
        });

        let cfg = S3Options {
            max_attempts: 1,
            read_timeout: Duration::from_millis(300),
            ..S3Options::default()
        };
        let store = store_at(addr, cfg);
        let reader = store
            .read("inbox/a.jsonl", 0)
            .await
            .expect("GetObject answered");
        assert_eq!(reader.size, 100);
        let mut got = Vec::new();
        let mut reader = reader.into_async_read();
        let err = reader
            .read_to_end(&mut got)
            .await
            .expect_err("a stalled body must fail");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(
            err.to_string().contains("s3://bucket/lake/inbox/a.jsonl"),
            "{err}"
        );
        assert_eq!(got, b"0123456789");
        // Hang up, and wait for the server off the runtime thread, which must stay free
        // to drive the connection's close.
        drop(reader);
        tokio::task::spawn_blocking(move || server.join())
            .await
            .expect("join")
            .expect("server thread");
    }
}

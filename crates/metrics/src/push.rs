//! The push itself: two HTTP requests to the Pushgateway, bounded as a whole by
//! `--pushgateway-timeout`. Nothing here can change a run's outcome or exit code:
//! every failure (refused connection, an error status, no answer in time) is a
//! warning in the log.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tracing::{info, warn};

use landing_engine::metrics::{Night, Pushgateway};
use landing_engine::shard::Shard;

use super::{group_path, marks_group, run_group, Ending};

/// Bytes of an error answer kept for the log (the Pushgateway explains a refusal in
/// a line or two).
const ANSWER_BYTES: usize = 1024;

/// Push the run group (PUT: replaces it) and, after a success or a publish, the
/// marks group (POST: replaces only the marks pushed). Logs the result; returns
/// whether both were accepted, for tests.
pub async fn push(
    gw: &Pushgateway,
    product: &str,
    shard: Option<Shard>,
    night: &Night,
    end: &Ending,
) -> bool {
    let path = group_path(product, shard);
    let mut requests = vec![(Method::PUT, path.clone(), run_group(night, end))];
    if let Some(marks) = marks_group(night, end) {
        requests.push((Method::POST, format!("{path}/marks/last"), marks));
    }
    let sent = async {
        let client = client()?;
        for (method, path, body) in requests {
            send(&client, method, &format!("{}{path}", gw.url), body).await?;
        }
        Ok::<(), String>(())
    };
    match tokio::time::timeout(gw.timeout, sent).await {
        Ok(Ok(())) => {
            info!(pushgateway = %gw.url, group = %path, "metrics pushed");
            true
        }
        Ok(Err(e)) => {
            warn!(pushgateway = %gw.url, error = %e, "metrics not pushed; the run's outcome stands");
            false
        }
        Err(_) => {
            warn!(
                pushgateway = %gw.url,
                timeout_secs = gw.timeout.as_secs(),
                "the Pushgateway did not answer in time; metrics not pushed; the run's outcome stands"
            );
            false
        }
    }
}

type HttpClient = Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// An HTTP/1.1 client for http and https URLs (system roots, as the S3 client).
fn client() -> std::result::Result<HttpClient, String> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| format!("cannot load the system's root certificates: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

async fn send(
    client: &HttpClient,
    method: Method,
    url: &str,
    body: String,
) -> std::result::Result<(), String> {
    let request = Request::builder()
        .method(method.clone())
        .uri(url)
        .header(
            hyper::header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("{method} {url}: {e}"))?;
    let response = client
        .request(request)
        .await
        .map_err(|e| format!("{method} {url}: {}", chain(&e)))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let answer = Limited::new(response.into_body(), ANSWER_BYTES)
        .collect()
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).trim().to_owned())
        .unwrap_or_default();
    Err(format!("{method} {url}: {status}: {answer}"))
}

/// An error and its causes on one line (a refused connection is a cause).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

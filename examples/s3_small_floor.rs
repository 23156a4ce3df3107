//! The floor of an inbox of small files on S3: the least work that lands
//! each file, with the job's SDK. Per file a GetObject (body kept in memory), a
//! PutObject of those bytes to a staging key and a CopyObject of it into place;
//! `IN_FLIGHT` files at a time. `scripts/bench --small-files-only` times it beside
//! `landing run --inbox` on the same inbox in the same run.
//!
//! usage: s3_small_floor BUCKET IN_PREFIX OUT_PREFIX IN_FLIGHT [log]
//!
//! With `log`, each file's copy is followed by the least a gap-free commit log asks
//! for: one small PutObject with `If-None-Match: *` of entry N+1 once entry N exists
//! (`OUT_PREFIX/log/<N>.json`), so the creates of all the files take turns.
//!
//! Lists `IN_PREFIX/` (timed: the job lists its inbox too), writes
//! `OUT_PREFIX/staging/NAME` and `OUT_PREFIX/raw/NAME`, prints
//! `{"files":N,"bytes":B,"secs":S}` on stdout, then deletes what it wrote (not
//! timed). Endpoint and credentials from the AWS standard chain; path-style.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Mutex;

use aws_sdk_s3::primitives::ByteStream;
use tokio::task::JoinSet;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    let (bucket, in_prefix, out_prefix, in_flight, log) = match args.as_slice() {
        [_, b, i, o, n] => (b, i, o, n, false),
        [_, b, i, o, n, mode] if mode == "log" => (b, i, o, n, true),
        _ => {
            return Err("usage: s3_small_floor BUCKET IN_PREFIX OUT_PREFIX IN_FLIGHT [log]".into())
        }
    };
    // The log's next number, taken in turn (None: no log).
    let log = log.then(|| Arc::new(Mutex::new(1u64)));
    let in_flight: usize = in_flight.parse()?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let conf = aws_sdk_s3::config::Builder::from(&sdk)
        .force_path_style(true)
        .build();
    let client = aws_sdk_s3::Client::from_conf(conf);
    let bucket: Arc<str> = bucket.as_str().into();
    let out: Arc<str> = out_prefix.trim_matches('/').into();

    let t = Instant::now();
    let keys = list(
        &client,
        &bucket,
        &format!("{}/", in_prefix.trim_matches('/')),
    )
    .await?;
    let mut tasks = JoinSet::new();
    let mut bytes = 0u64;
    for key in &keys {
        while tasks.len() >= in_flight {
            bytes += tasks.join_next().await.ok_or("join")???;
        }
        let (c, b, o, k, l) = (
            client.clone(),
            bucket.clone(),
            out.clone(),
            key.clone(),
            log.clone(),
        );
        tasks.spawn(async move { land(&c, &b, &o, &k, l.as_deref()).await });
    }
    while let Some(t) = tasks.join_next().await {
        bytes += t??;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{{\"files\":{},\"bytes\":{bytes},\"secs\":{secs:.3}}}",
        keys.len()
    );

    // Not timed: leave the bucket as it was, so a rerun measures the same work.
    for key in list(&client, &bucket, &format!("{out}/")).await? {
        client
            .delete_object()
            .bucket(&*bucket)
            .key(key)
            .send()
            .await?;
    }
    Ok(())
}

/// Every key under `prefix`.
async fn list(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<String>, BoxError> {
    let mut keys = Vec::new();
    let mut pages = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        keys.extend(
            page?
                .contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_owned)),
        );
    }
    Ok(keys)
}

/// GET `key`, PUT its bytes to `out/staging/NAME`, copy that to `out/raw/NAME`;
/// with a `log`, then create its next entry.
async fn land(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    out: &str,
    key: &str,
    log: Option<&Mutex<u64>>,
) -> Result<u64, BoxError> {
    let name = key.rsplit('/').next().unwrap_or(key);
    let body = client
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await?
        .body;
    let data = body.collect().await?.into_bytes();
    let size = data.len() as u64;
    let staging = format!("{out}/staging/{name}");
    client
        .put_object()
        .bucket(bucket)
        .key(&staging)
        .body(ByteStream::from(data))
        .send()
        .await?;
    client
        .copy_object()
        .bucket(bucket)
        .key(format!("{out}/raw/{name}"))
        .copy_source(format!("{bucket}/{staging}"))
        .send()
        .await?;
    if let Some(next) = log {
        let mut n = next.lock().await;
        // About the size of one of the job's entries.
        let entry = format!(
            "{{\"sequence\":{},\"key\":\"raw/{name}\",\"pad\":\"{}\"}}\n",
            *n,
            "x".repeat(600)
        );
        client
            .put_object()
            .bucket(bucket)
            .key(format!("{out}/log/{:020}.json", *n))
            .if_none_match("*")
            .body(ByteStream::from(entry.into_bytes()))
            .send()
            .await?;
        *n += 1;
    }
    Ok(size)
}

//! The S3 baseline of the benchmark, the floor of the design's shape: how long the
//! server takes to GET an object (kept in memory), to multipart-PUT those bytes
//! with the same part size and concurrency as the job, and
//! to CopyObject that object to another key (the promotion). `scripts/bench`
//! compares a `landing run` against the sum of the three.
//!
//! usage: s3_baseline BUCKET KEY PART_SIZE_MIB CONCURRENCY
//!        s3_baseline --upload BUCKET KEY FILE   (create the bucket, upload FILE)
//!        s3_baseline --upload-dir BUCKET PREFIX DIR   (every file of DIR under PREFIX/)
//! (endpoint and credentials from the AWS standard chain; path-style addressing)

use std::time::Instant;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::Bytes;
use tokio::task::JoinSet;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, bucket, key, file] = args.as_slice() {
        if flag == "--upload" {
            return upload(bucket, key, file).await;
        }
        if flag == "--upload-dir" {
            return upload_dir(bucket, key, file).await;
        }
    }
    let [_, bucket, key, part_mib, conc] = args.as_slice() else {
        return Err("usage: s3_baseline BUCKET KEY PART_SIZE_MIB CONCURRENCY".into());
    };
    let part = part_mib.parse::<usize>()? << 20;
    let conc: usize = conc.parse()?;
    let client = client().await;
    let t = Instant::now();
    let got = get_all(&client, bucket, key).await?;
    let get_s = t.elapsed().as_secs_f64();
    let size = got.len();
    let payload = Bytes::from(got);

    let dest = format!("{key}.baseline-put");
    let t = Instant::now();
    multipart_put(&client, bucket, &dest, &payload, part, conc).await?;
    let put_s = t.elapsed().as_secs_f64();

    // The promotion: the server's own copy of the object just written.
    let copied = format!("{key}.baseline-copy");
    let t = Instant::now();
    client
        .copy_object()
        .bucket(bucket)
        .key(&copied)
        .copy_source(format!("{bucket}/{dest}"))
        .send()
        .await?;
    let copy_s = t.elapsed().as_secs_f64();
    for k in [&dest, &copied] {
        client.delete_object().bucket(bucket).key(k).send().await?;
    }
    println!(
        "{{\"bytes\":{size},\"get_s\":{get_s:.3},\"put_s\":{put_s:.3},\"copy_s\":{copy_s:.3}}}"
    );
    Ok(())
}

/// GET the whole object into memory. Kept, so the PUT sends the same bytes (a server
/// may compress or dedupe, so a filler payload would not cost it the same).
async fn get_all(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
) -> Result<Vec<u8>, BoxError> {
    let mut body = client
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await?
        .body;
    let mut got = Vec::new();
    while let Some(chunk) = body.try_next().await? {
        got.extend_from_slice(&chunk);
    }
    Ok(got)
}

/// Multipart-PUT `payload` to `dest` as the job does: parts of `part` bytes (at least
/// one part, even for an empty payload), at most `conc` in flight.
async fn multipart_put(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    dest: &str,
    payload: &Bytes,
    part: usize,
    conc: usize,
) -> Result<(), BoxError> {
    let size = payload.len();
    let up = client
        .create_multipart_upload()
        .bucket(bucket)
        .key(dest)
        .send()
        .await?;
    let upload_id = up.upload_id().ok_or("no upload id")?.to_owned();
    let mut parts = Vec::new();
    let mut tasks = JoinSet::new();
    let (mut sent, mut number) = (0usize, 1i32);
    while sent < size || number == 1 {
        let len = part.min(size - sent);
        while tasks.len() >= conc {
            parts.push(tasks.join_next().await.ok_or("join")???);
        }
        let (c, b, k, id, body) = (
            client.clone(),
            bucket.to_owned(),
            dest.to_owned(),
            upload_id.clone(),
            payload.slice(sent..sent + len),
        );
        tasks.spawn(async move {
            let r = c
                .upload_part()
                .bucket(b)
                .key(k)
                .upload_id(id)
                .part_number(number)
                .body(ByteStream::from(body))
                .send()
                .await?;
            Ok::<_, BoxError>(
                CompletedPart::builder()
                    .part_number(number)
                    .set_e_tag(r.e_tag().map(str::to_owned))
                    .build(),
            )
        });
        sent += len;
        number += 1;
    }
    while let Some(p) = tasks.join_next().await {
        parts.push(p??);
    }
    parts.sort_by_key(|p| p.part_number());
    client
        .complete_multipart_upload()
        .bucket(bucket)
        .key(dest)
        .upload_id(&upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build(),
        )
        .send()
        .await?;
    Ok(())
}

async fn client() -> aws_sdk_s3::Client {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let conf = aws_sdk_s3::config::Builder::from(&sdk)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}

/// Benchmark setup: a bucket holding the input.
async fn upload(bucket: &str, key: &str, file: &str) -> Result<(), BoxError> {
    let client = client().await;
    // An existing bucket is fine for a rerun of the benchmark.
    let _ = client.create_bucket().bucket(bucket).send().await;
    let body = ByteStream::from_path(file).await?;
    client
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(body)
        .send()
        .await?;
    Ok(())
}

/// Benchmark setup: a bucket holding every file of `dir` under `prefix/`, 16 at once.
async fn upload_dir(bucket: &str, prefix: &str, dir: &str) -> Result<(), BoxError> {
    let client = client().await;
    let _ = client.create_bucket().bucket(bucket).send().await;
    let mut tasks = JoinSet::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .ok_or("no name")?
            .to_string_lossy()
            .into_owned();
        while tasks.len() >= 16 {
            tasks.join_next().await.ok_or("join")???;
        }
        let (c, b, k) = (
            client.clone(),
            bucket.to_owned(),
            format!("{prefix}/{name}"),
        );
        tasks.spawn(async move {
            let body = ByteStream::from_path(&path).await?;
            c.put_object().bucket(b).key(k).body(body).send().await?;
            Ok::<_, BoxError>(())
        });
    }
    while let Some(t) = tasks.join_next().await {
        t??;
    }
    Ok(())
}

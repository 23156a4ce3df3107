//! Grows a product's commit log on S3 to a given length, for `scripts/bench --feed-only`:
//! what `landing feed` costs over a long log. Landing 100,000 days one run at a time
//! would take hours; the entries' shape is what matters, so entry 1, written by the
//! job, is the template of every other.
//!
//! usage: seed_log BUCKET LAKE_PREFIX PRODUCT UPTO KEYS IN_FLIGHT
//!
//! Reads `LAKE_PREFIX/raw/PRODUCT/_landing_log/<1>.json` and creates entries 2..=UPTO
//! beside it (`If-None-Match: *`, IN_FLIGHT at a time): each names one of KEYS day
//! files in turn, so that from entry KEYS+1 on each replaces the one KEYS before it.
//! Then a snapshot every 1,000 entries (the latest entry of each key, as the job
//! writes them) and the `_last` hint. Prints `{"entries":N,"secs":S}`. Endpoint and
//! credentials from the AWS standard chain; path-style.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use aws_sdk_s3::primitives::ByteStream;
use serde_json::{json, Value};
use tokio::task::JoinSet;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `crates/engine/src/commit_log.rs`: a snapshot follows every this many entries.
const SNAPSHOT_EVERY: u64 = 1000;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    let [_, bucket, prefix, product, upto, keys, in_flight] = args.as_slice() else {
        return Err("usage: seed_log BUCKET LAKE_PREFIX PRODUCT UPTO KEYS IN_FLIGHT".into());
    };
    let (upto, keys, in_flight): (u64, u64, usize) =
        (upto.parse()?, keys.parse()?, in_flight.parse()?);
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let conf = aws_sdk_s3::config::Builder::from(&sdk)
        .force_path_style(true)
        .build();
    let client = aws_sdk_s3::Client::from_conf(conf);
    let bucket: Arc<str> = bucket.as_str().into();
    let folder: Arc<str> =
        format!("{}/raw/{product}/_landing_log", prefix.trim_matches('/')).into();

    let first = client
        .get_object()
        .bucket(&*bucket)
        .key(entry_key(&folder, 1))
        .send()
        .await?
        .body
        .collect()
        .await?
        .into_bytes();
    let template: Value = serde_json::from_slice(&first)?;

    let t = Instant::now();
    let mut tasks = JoinSet::new();
    let mut state: BTreeMap<String, Value> = BTreeMap::new();
    state.insert(
        template["key"].as_str().unwrap_or_default().to_owned(),
        template.clone(),
    );
    for n in 2..=upto {
        let e = seeded(&template, product, n, keys);
        state.insert(e["key"].as_str().unwrap_or_default().to_owned(), e.clone());
        if n % SNAPSHOT_EVERY == 0 {
            let snap = json!({ "sequence": n, "files": state.values().collect::<Vec<_>>() });
            spawn_put(
                &mut tasks,
                in_flight,
                &client,
                &bucket,
                snapshot_key(&folder, n),
                snap,
            )
            .await?;
        }
        spawn_put(
            &mut tasks,
            in_flight,
            &client,
            &bucket,
            entry_key(&folder, n),
            e,
        )
        .await?;
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    // The hint last, as the job writes it after its entry.
    client
        .put_object()
        .bucket(&*bucket)
        .key(format!("{folder}/_last"))
        .body(ByteStream::from(format!("{upto}\n").into_bytes()))
        .send()
        .await?;
    println!(
        "{{\"entries\":{upto},\"secs\":{:.3}}}",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Entry `n`: the template naming day `n mod keys`, replacing that day's entry before.
fn seeded(template: &Value, product: &str, n: u64, keys: u64) -> Value {
    let mut e = template.clone();
    let day = n % keys;
    e["sequence"] = json!(n);
    e["input_name"] = json!(format!("{product}-seed-{day:06}.jsonl"));
    e["key"] = json!(format!("raw/{product}/{product}-seed-{day:06}.jsonl"));
    e["run_id"] = json!(format!("seed-{n}"));
    let obj = e.as_object_mut().expect("an entry is an object");
    match n.checked_sub(keys).filter(|p| *p >= 1) {
        Some(prior) => obj.insert(
            "replaced".into(),
            json!({
                "sequence": prior,
                "published_size": template["published_size"],
                "published_etag": template["published_etag"],
                "published_sha256": template["published_sha256"],
            }),
        ),
        None => obj.remove("replaced"),
    };
    e
}

async fn spawn_put(
    tasks: &mut JoinSet<Result<(), BoxError>>,
    in_flight: usize,
    client: &aws_sdk_s3::Client,
    bucket: &Arc<str>,
    key: String,
    body: Value,
) -> Result<(), BoxError> {
    while tasks.len() >= in_flight {
        tasks.join_next().await.ok_or("join")???;
    }
    let (c, b) = (client.clone(), bucket.clone());
    tasks.spawn(async move {
        let mut bytes = serde_json::to_vec(&body)?;
        bytes.push(b'\n');
        c.put_object()
            .bucket(&*b)
            .key(key)
            .if_none_match("*")
            .body(ByteStream::from(bytes))
            .send()
            .await?;
        Ok(())
    });
    Ok(())
}

fn entry_key(folder: &str, n: u64) -> String {
    format!("{folder}/{n:020}.json")
}

fn snapshot_key(folder: &str, n: u64) -> String {
    format!("{folder}/_snapshots/{n:020}.json")
}

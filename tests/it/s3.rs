//! S3-specific end-to-end behaviour: the multipart-copy promotion path, awkward
//! keys, the sweep of a crashed run's upload, least-privilege credentials, and the
//! sample day landing with the same bytes as on a local lake.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;

use crate::support::proxy::{Op, Proxy};
use crate::support::*;

fn sample() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/inbox/progress-2026-03-02.jsonl"
    ))
    .unwrap()
}

/// Above the copy threshold the publish uses UploadPartCopy parts (counted through a
/// forwarding proxy: one per 5 MiB, no CopyObject); the bytes are the same as a plain
/// CopyObject's.
fn multipart_copy_promotion_publishes_the_same_bytes(server: Server) {
    let body = generated(60_000, 21); // ~12 MiB
    let expected = expected_publish(&body);
    let w = World::new(Kind::S3(server), "mpc");
    let input = w.put_input("big.jsonl", &body);
    let proxy = Proxy::start(&server.endpoint());
    let url = proxy.url();
    let r = w.run_env(
        &input,
        &["--s3-part-size-mib", "5", "--s3-copy-threshold", "6291456"],
        &[("AWS_ENDPOINT_URL", url.as_str())],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(w.get("raw/progress/big.jsonl").unwrap(), expected);
    let to_raw = |op: Op| {
        proxy
            .seen()
            .iter()
            .filter(|s| s.op == op && s.key.ends_with("raw/progress/big.jsonl"))
            .count()
    };
    let parts = expected.len().div_ceil(5 << 20);
    assert_eq!(
        (to_raw(Op::UploadPartCopy), to_raw(Op::CopyObject)),
        (parts, 0),
        "{}",
        proxy.report()
    );
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    assert_eq!(
        w.run(&input, &["--s3-copy-threshold", "6291456"]).action(),
        "skipped"
    );
}

/// Input names with spaces, `+` and non-ASCII characters land under the same name.
fn awkward_keys_land_and_skip(server: Server) {
    for name in ["día 1+2.jsonl", "c++ 100%~x.jsonl"] {
        let w = World::new(Kind::S3(server), "keys");
        let input = w.put_input(name, format!("{}\n", event("a", 1)).as_bytes());
        let r = w.run(&input, &[]);
        assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
        assert!(
            w.get(&format!("raw/progress/{name}")).is_some(),
            "{name} not published"
        );
        assert!(w
            .get(&format!("checkpoints/progress/{name}.json"))
            .is_some());
        assert_eq!(w.run(&input, &[]).action(), "skipped", "{name}");
    }
}

/// A crashed run's incomplete multipart upload is swept by the next run.
fn next_run_sweeps_a_crashed_upload(server: Server) {
    let mut w = World::new(Kind::S3(server), "sweep");
    w.env.push(("LANDING_S3_PART_SIZE_MIB".into(), "5".into()));
    w.env
        .extend(SHORT_LEASE.map(|(k, v)| (k.to_owned(), v.to_owned())));
    let input = w.put_input("day.jsonl", &generated(60_000, 22));
    let crashed = w.run_env(&input, &[], &[("LANDING_CRASH_AT", "after-part:1")]);
    assert_eq!(crashed.signal, Some(9), "{}", crashed.stderr);
    assert!(
        w.leftovers().iter().any(|l| l.starts_with("upload:")),
        "{:?}",
        w.leftovers()
    );
    let r = w.run(&input, &["--lease-wait", TAKEOVER_WAIT]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("swept leftovers"), "{}", r.stderr);
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
}

/// The sample day lands with the golden bytes on every server (as on a local lake).
fn sample_day_lands_identically_on_every_server(server: Server) {
    let golden = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/progress-2026-03-02.jsonl"
    ))
    .unwrap();
    let w = World::new(Kind::S3(server), "golden");
    let input = w.put_input("progress-2026-03-02.jsonl", &sample());
    assert_eq!(w.run(&input, &["--max-rejected-lines", "1"]).code, Some(0));
    assert_eq!(
        w.get("raw/progress/progress-2026-03-02.jsonl").unwrap(),
        golden
    );
}

fn var(name: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} not set: run the tests through scripts/test-servers"))
}

async fn client_with(access: &str, secret: &str) -> Client {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(Server::Seaweed.endpoint())
        .region(aws_config::Region::from_static("us-east-1"))
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            access, secret, None, None, "test",
        ))
        .load()
        .await;
    Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    )
}

/// With a SeaweedFS identity allowed only to read the inbox and write under the lake
/// prefix, the job lands the file; the SQL reader identity reads `raw/` and is
/// denied everything else.
#[test]
fn least_privilege_job_lands_and_reader_is_confined() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let bucket = var("LANDING_TEST_SEAWEED_LP_BUCKET");
    let admin = rt.block_on(Server::Seaweed.admin_client());
    rt.block_on(
        admin
            .put_object()
            .bucket(&bucket)
            .key("inbox/lp-day.jsonl")
            .body(ByteStream::from(sample()))
            .send(),
    )
    .expect("admin puts the input");
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_landing"))
        .args([
            "run",
            "--input",
            &format!("s3://{bucket}/inbox/lp-day.jsonl"),
        ])
        .args([
            "--lake",
            &format!("s3://{bucket}/lake"),
            "--max-rejected-lines",
            "1",
        ])
        .current_dir(tmp.path())
        .env_clear()
        .env("HOME", tmp.path())
        .env("AWS_CONFIG_FILE", tmp.path().join("none"))
        .env("AWS_SHARED_CREDENTIALS_FILE", tmp.path().join("none"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", Server::Seaweed.endpoint())
        .env("AWS_REGION", "us-east-1")
        .env(
            "AWS_ACCESS_KEY_ID",
            var("LANDING_TEST_SEAWEED_LP_ACCESS_KEY"),
        )
        .env(
            "AWS_SECRET_ACCESS_KEY",
            var("LANDING_TEST_SEAWEED_LP_SECRET_KEY"),
        )
        .env("LANDING_S3_FORCE_PATH_STYLE", "true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"action\":\"published\""));
    assert!(
        !stderr.contains(&var("LANDING_TEST_SEAWEED_LP_SECRET_KEY")),
        "secret in logs"
    );

    let reader = rt.block_on(client_with(
        &var("LANDING_TEST_SEAWEED_READER_ACCESS_KEY"),
        &var("LANDING_TEST_SEAWEED_READER_SECRET_KEY"),
    ));
    // HTTP status of a reader GET (200 when allowed).
    let get = |key: &str| match rt.block_on(reader.get_object().bucket(&bucket).key(key).send()) {
        Ok(_) => 200,
        Err(e) => e.raw_response().map_or(0, |r| r.status().as_u16()),
    };
    assert_eq!(
        get("lake/raw/progress/lp-day.jsonl"),
        200,
        "reader cannot read the publish"
    );
    assert_eq!(
        get("lake/checkpoints/progress/lp-day.jsonl.json"),
        403,
        "reader read a checkpoint"
    );
    // The job identity cannot write into the inbox.
    let job = rt.block_on(client_with(
        &var("LANDING_TEST_SEAWEED_LP_ACCESS_KEY"),
        &var("LANDING_TEST_SEAWEED_LP_SECRET_KEY"),
    ));
    let put = rt.block_on(
        job.put_object()
            .bucket(&bucket)
            .key("inbox/forged.jsonl")
            .body(ByteStream::from_static(b"x"))
            .send(),
    );
    assert_eq!(
        put.expect_err("job wrote the inbox")
            .raw_response()
            .map(|r| r.status().as_u16()),
        Some(403)
    );
}

/// The README's checksum settings (the SDK's own variable names and spellings) are
/// accepted and the job lands with them on every server.
fn checksum_when_required_from_the_environment(server: Server) {
    let w = World::new(Kind::S3(server), "cksum");
    let input = w.put_input("day.jsonl", &generated(30_000, 23));
    let env = [
        ("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required"),
        ("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required"),
    ];
    let r = w.run_env(&input, &["--s3-part-size-mib", "5"], &env);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.action(), "published");
    assert_eq!(w.run_env(&input, &[], &env).action(), "skipped");
}

matrix! {
    s3 multipart_copy_promotion_publishes_the_same_bytes: [seaweed, moto, localstack];
    s3 awkward_keys_land_and_skip: [seaweed, moto, localstack];
    s3 next_run_sweeps_a_crashed_upload: [seaweed, moto, localstack];
    s3 sample_day_lands_identically_on_every_server: [seaweed, moto, localstack];
    s3 checksum_when_required_from_the_environment: [seaweed, moto, localstack];
}

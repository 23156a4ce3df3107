//! Every run of the binary on a world's lake is checked against the commit log
//! (docs/interface.md § 6), whatever the test is about: each `published` summary names
//! a fresh entry that exists in the store and says the same product, input, hash,
//! counts and run, and names the object at its key by version and by the SHA-256 of the
//! bytes there (which the test judges against the model); a `skipped` summary names the
//! entry of the publish it found. No two publishes of one world share a number.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use serde_json::Value;

use super::world::{sha256, World};

/// The numbers the world's publishes took, per product.
#[derive(Default)]
pub struct Taken(Mutex<BTreeMap<String, BTreeSet<u64>>>);

/// Check every summary line of `stdout` against the log in `w`'s lake.
pub fn check_summaries(w: &World, taken: &Taken, stdout: &str) {
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let Ok(s) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match s["action"].as_str() {
            Some("published") => check_publish(w, taken, &s),
            Some("skipped") if !s["log_sequence"].is_null() => check_skip(w, &s),
            _ => {}
        }
    }
}

fn check_publish(w: &World, taken: &Taken, s: &Value) {
    let n = s["log_sequence"]
        .as_u64()
        .unwrap_or_else(|| panic!("a publish names no log entry: {s}"));
    let product = s["product"].as_str().expect("summary product");
    let fresh = taken
        .0
        .lock()
        .expect("taken")
        .entry(product.to_owned())
        .or_default()
        .insert(n);
    assert!(fresh, "two publishes took log entry {n} of {product}: {s}");
    let e = entry(w, product, n, s);
    for field in [
        "product",
        "input_sha256",
        "run_id",
        "accepted_rows",
        "rejected_rows",
        "duplicate_rows",
    ] {
        assert_eq!(e[field], s[field], "{field}: entry {e}\nsummary {s}");
    }
    let input = s["input"].as_str().expect("summary input");
    // The entry names the day: a compressed input's name without its suffix.
    let name = input.rsplit('/').next().unwrap_or(input);
    let day = e["input_name"].as_str().expect("entry input_name");
    assert!(
        [day.to_owned(), format!("{day}.gz"), format!("{day}.zst")].contains(&name.to_owned()),
        "entry {e}\nsummary {s}"
    );
    let key = key_of(w, s);
    assert_eq!(e["key"], key, "entry {e}\nsummary {s}");
    let bytes = w
        .get(key)
        .unwrap_or_else(|| panic!("{key} published, then gone"));
    assert_eq!(e["published_sha256"], sha256(&bytes), "entry {e}");
    assert!(
        crate::commit_log::names_published(w, &e, key),
        "entry {e} does not name the version at {key}: {:?}",
        w.published_marker(key)
    );
}

fn check_skip(w: &World, s: &Value) {
    let n = s["log_sequence"].as_u64().expect("a number");
    let product = s["product"].as_str().expect("summary product");
    let e = entry(w, product, n, s);
    assert_eq!(e["key"], key_of(w, s), "entry {e}\nsummary {s}");
    assert_eq!(
        e["input_sha256"], s["input_sha256"],
        "entry {e}\nsummary {s}"
    );
}

/// The summary's `published_path` (a location in the lake) as a key of the lake.
fn key_of<'s>(w: &World, s: &'s Value) -> &'s str {
    let path = s["published_path"].as_str().expect("published_path");
    path.strip_prefix(&w.lake_arg())
        .and_then(|k| k.strip_prefix('/'))
        .unwrap_or_else(|| panic!("{path} is not in the lake {}", w.lake_arg()))
}

/// Entry `n` of `product`'s log, read from the store; it must exist and say its number.
fn entry(w: &World, product: &str, n: u64, s: &Value) -> Value {
    let key = format!("raw/{product}/_landing_log/{n:020}.json");
    let bytes = w
        .get(&key)
        .unwrap_or_else(|| panic!("the summary names {key}, which does not exist: {s}"));
    let e: Value = serde_json::from_slice(&bytes).unwrap_or_else(|err| panic!("{key}: {err}"));
    assert_eq!(e["sequence"], n, "{key}");
    e
}

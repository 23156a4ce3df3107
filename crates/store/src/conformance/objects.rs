//! The object primitives of [`Store`](crate::Store): small conditional writes, reads
//! (whole, chunked, from an offset), heads, deletes, one-level listings, locations.

use bytes::Bytes;
use tokio::io::AsyncReadExt;

use super::{assert_precondition, pattern, Fixture, Named, MIB};
use crate::PutMode;
use landing_error::Error;

pub async fn location_names_the_object(fx: &dyn Fixture) {
    let store = fx.lake();
    let key = "raw/progress/a.jsonl";
    let loc = store.location(key);
    match fx.location_of(key) {
        Named::Exactly(want) => assert_eq!(loc, want),
        Named::EndingWith(end) => assert!(loc.ends_with(&end), "{loc}"),
    }
}

pub async fn conditional_create_twice_is_precondition(fx: &dyn Fixture) {
    let store = fx.lake();
    let key = "checkpoints/progress/a.jsonl.json";
    let v1 = store
        .put_small(key, Bytes::from_static(b"first"), PutMode::Create)
        .await
        .expect("first create");
    assert_precondition(
        store
            .put_small(key, Bytes::from_static(b"second"), PutMode::Create)
            .await,
        "second create",
    );
    let got = crate::get_small(&*store, key)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(&got.bytes[..], b"first");
    assert_eq!(got.version, v1);
}

pub async fn if_match_current_version_replaces(fx: &dyn Fixture) {
    let store = fx.lake();
    let key = "checkpoints/progress/a.jsonl.json";
    let v1 = store
        .put_small(key, Bytes::from_static(b"one"), PutMode::Create)
        .await
        .expect("create");
    let read = crate::get_small(&*store, key)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(
        read.version, v1,
        "get_small returns the version put_small returned"
    );
    let v2 = store
        .put_small(
            key,
            Bytes::from_static(b"two"),
            PutMode::Update(read.version),
        )
        .await
        .expect("replace current version");
    assert_ne!(v1, v2, "a replace yields a new version");
    let got = crate::get_small(&*store, key)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(&got.bytes[..], b"two");
    assert_eq!(got.version, v2);
}

pub async fn if_match_stale_version_is_precondition(fx: &dyn Fixture) {
    let store = fx.lake();
    let key = "checkpoints/progress/a.jsonl.json";
    let v1 = store
        .put_small(key, Bytes::from_static(b"one"), PutMode::Create)
        .await
        .expect("create");
    let v2 = store
        .put_small(key, Bytes::from_static(b"two"), PutMode::Update(v1.clone()))
        .await
        .expect("replace");
    assert_precondition(
        store
            .put_small(key, Bytes::from_static(b"three"), PutMode::Update(v1))
            .await,
        "replace of a stale version",
    );
    let got = crate::get_small(&*store, key)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(&got.bytes[..], b"two", "a lost condition writes nothing");
    assert_eq!(got.version, v2);
}

pub async fn if_match_missing_key_is_precondition(fx: &dyn Fixture) {
    let store = fx.lake();
    let key = "checkpoints/progress/gone.jsonl.json";
    // A version that once existed: create, read, delete.
    let v = store
        .put_small(key, Bytes::from_static(b"was"), PutMode::Create)
        .await
        .expect("create");
    store.delete(key).await.expect("delete");
    assert_precondition(
        store
            .put_small(key, Bytes::from_static(b"now"), PutMode::Update(v))
            .await,
        "If-Match on a missing key",
    );
    assert!(
        crate::get_small(&*store, key).await.expect("get").is_none(),
        "nothing written"
    );
}

pub async fn get_small_missing_is_none(fx: &dyn Fixture) {
    let store = fx.lake();
    assert!(crate::get_small(&*store, "checkpoints/progress/none.json")
        .await
        .expect("get")
        .is_none());
}

pub async fn head_missing_is_none(fx: &dyn Fixture) {
    let store = fx.lake();
    assert!(store
        .head("raw/progress/none.jsonl")
        .await
        .expect("head")
        .is_none());
}

pub async fn delete_missing_is_ok_and_delete_removes(fx: &dyn Fixture) {
    let store = fx.lake();
    store
        .delete("locks/progress/none.lock")
        .await
        .expect("delete of a missing key");
    let key = "locks/progress/a.jsonl.lock";
    store
        .put_small(key, Bytes::from_static(b"held"), PutMode::Overwrite)
        .await
        .expect("put");
    store.delete(key).await.expect("delete");
    assert!(store.head(key).await.expect("head").is_none());
}

pub async fn read_streams_the_bytes(fx: &dyn Fixture) {
    let store = fx.lake();
    let key = "inbox/a.jsonl";
    let data = pattern(3 * MIB + 17, 1);
    store
        .put_small(key, Bytes::from(data.clone()), PutMode::Overwrite)
        .await
        .expect("put");
    let mut r = store.read(key, 0).await.expect("read");
    assert_eq!(r.size, data.len() as u64);
    // Read in chunks, as the pipeline does.
    let mut got = Vec::new();
    let mut buf = bytes::BytesMut::with_capacity(64 * 1024);
    loop {
        buf.clear();
        let n = r.read_chunk(&mut buf).await.expect("read body");
        assert_eq!(n, buf.len(), "a chunk appends what it read");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf);
    }
    assert!(got == data, "streamed bytes differ");
}

/// A read from an offset (a spilled run's replay) streams exactly the bytes from
/// there on, and its size is what is left; a missing object is `NotFound`.
pub async fn read_from_streams_the_rest(fx: &dyn Fixture) {
    let store = fx.lake();
    let key = "inbox/b.jsonl";
    let data = pattern(MIB + 5, 2);
    store
        .put_small(key, Bytes::from(data.clone()), PutMode::Overwrite)
        .await
        .expect("put");
    for offset in [0, 1, 4096, MIB + 4] {
        let r = store.read(key, offset as u64).await.expect("read_from");
        assert_eq!(r.size, (data.len() - offset) as u64, "offset {offset}");
        let mut got = Vec::new();
        r.into_async_read()
            .read_to_end(&mut got)
            .await
            .expect("read body");
        assert!(got[..] == data[offset..], "offset {offset}: bytes differ");
    }
    match store.read("inbox/none.jsonl", 10).await {
        Err(Error::NotFound { .. }) => {}
        other => panic!("expected NotFound, got {:?}", other.map(|r| r.size)),
    }
}

pub async fn read_missing_is_not_found(fx: &dyn Fixture) {
    let store = fx.lake();
    match store.read("inbox/none.jsonl", 0).await {
        Err(Error::NotFound { location }) => {
            assert!(location.contains("inbox/none.jsonl"), "{location}")
        }
        Err(e) => panic!("expected NotFound, got {e:?}"),
        Ok(_) => panic!("expected NotFound, got a reader"),
    }
}

/// `list` shows one level: the files directly under a folder with the size and
/// identity `head` reports, sub-folders by name, nothing deeper; a missing folder is
/// empty. (Pagination past 1,000 keys: the `inbox` module.)
pub async fn list_shows_one_level_with_identity(fx: &dyn Fixture) {
    let store = fx.lake();
    for (key, body) in [
        ("inbox/b.jsonl", &b"bb"[..]),
        ("inbox/a.jsonl", b"a"),
        ("inbox/sub/c.jsonl", b"ccc"),
        ("inboxes/d.jsonl", b"d"),
    ] {
        store
            .put_small(key, Bytes::from_static(body), PutMode::Overwrite)
            .await
            .expect("put");
    }
    let listing = store.list("inbox").await.expect("list");
    let names: Vec<&str> = listing.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["a.jsonl", "b.jsonl"], "{listing:?}");
    assert_eq!(listing.folders, ["sub"]);
    for f in &listing.files {
        let head = store
            .head(&format!("inbox/{}", f.name))
            .await
            .expect("head")
            .expect("exists");
        assert_eq!(f.meta, head, "{}", f.name);
        assert!(f.modified_ns > 0);
    }
    assert_eq!(store.list("inbox/").await.expect("list").files.len(), 2);
    let empty = store.list("nothing/here").await.expect("list missing");
    assert!(empty.files.is_empty() && empty.folders.is_empty());
    let root = store.list("").await.expect("list root");
    assert!(root.files.is_empty(), "{root:?}");
    assert!(root.folders.contains(&"inbox".to_owned()), "{root:?}");
}

//! The store conformance suite (`landing_store::conformance`) on every backend: a
//! local folder, the memory store, and SeaweedFS, moto and LocalStack from
//! `scripts/test-servers` (`scripts/test-servers -- cargo nextest run -p
//! landing-store --test conformance`). Without those servers the S3 tests fail, they
//! do not skip; the `::local` and `::memory` tests need none. Each test gets its own
//! bucket (or temp folder, or memory store), so tests run in parallel without sharing
//! state.

mod fixtures;
// The S3 test servers as the binary's integration tests see them: one module for
// both suites (this one uses a part of it).
#[allow(dead_code)]
#[path = "../../../../tests/it/support/servers.rs"]
mod servers;

use landing_store::conformance::*;

/// A backend a check runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Local,
    Memory,
    S3(servers::Server),
}

impl Backend {
    /// A fresh, empty fixture of this backend for the test `test`.
    async fn fixture(self, test: &str) -> Box<dyn Fixture> {
        match self {
            Backend::Local => Box::new(fixtures::Local::new()),
            Backend::Memory => Box::new(fixtures::Memory::new()),
            Backend::S3(server) => Box::new(fixtures::S3::new(server, test).await),
        }
    }
}

/// The backend matrix: one `#[tokio::test]` per (check, backend), named
/// `<check>::<backend>`, awaiting the check of `landing_store::conformance` of that
/// name on a fresh fixture. Each backend is written as `local`, `memory`, `seaweed`,
/// `moto` or `localstack`; any other name is a compile error. Entries, each ending in
/// `;`: `check: [local, seaweed];`.
macro_rules! matrix {
    (@backend local) => { $crate::Backend::Local };
    (@backend memory) => { $crate::Backend::Memory };
    (@backend seaweed) => { $crate::Backend::S3($crate::servers::Server::Seaweed) };
    (@backend moto) => { $crate::Backend::S3($crate::servers::Server::Moto) };
    (@backend localstack) => { $crate::Backend::S3($crate::servers::Server::Localstack) };
    (@backend $other:ident) => {
        compile_error!(concat!(
            "unknown backend `",
            stringify!($other),
            "` (expected local, memory, seaweed, moto or localstack)"
        ))
    };

    () => {};
    ($name:ident: [$($backend:ident),+ $(,)?]; $($rest:tt)*) => {
        mod $name {
            $(
                #[tokio::test]
                async fn $backend() {
                    let fx = matrix!(@backend $backend).fixture(stringify!($name)).await;
                    super::$name(&*fx).await
                }
            )+
        }
        matrix!($($rest)*);
    };
}

// Checks every backend must pass: a local folder, each S3 server and memory.
matrix! {
    location_names_the_object: [local, seaweed, moto, localstack, memory];
    conditional_create_twice_is_precondition: [local, seaweed, moto, localstack, memory];
    if_match_current_version_replaces: [local, seaweed, moto, localstack, memory];
    if_match_stale_version_is_precondition: [local, seaweed, moto, localstack, memory];
    if_match_missing_key_is_precondition: [local, seaweed, moto, localstack, memory];
    get_small_missing_is_none: [local, seaweed, moto, localstack, memory];
    head_missing_is_none: [local, seaweed, moto, localstack, memory];
    delete_missing_is_ok_and_delete_removes: [local, seaweed, moto, localstack, memory];
    read_streams_the_bytes: [local, seaweed, moto, localstack, memory];
    read_from_streams_the_rest: [local, seaweed, moto, localstack, memory];
    read_missing_is_not_found: [local, seaweed, moto, localstack, memory];
    stage_complete_promote_publishes_exact_bytes: [local, seaweed, moto, localstack, memory];
    staged_object_is_invisible_before_promote: [local, seaweed, moto, localstack, memory];
    abort_leaves_nothing_behind: [local, seaweed, moto, localstack, memory];
    staging_past_the_deadline_writes_nothing: [local, seaweed, moto, localstack, memory];
    multi_part_staging_round_trips: [local, seaweed, moto, localstack, memory];
    empty_output_round_trips: [local, seaweed, moto, localstack, memory];
    multipart_copy_promotion_round_trips: [local, seaweed, moto, localstack, memory];
    odd_keys_round_trip: [local, seaweed, moto, localstack, memory];
    a_promotions_label_comes_with_the_object: [local, seaweed, moto, localstack, memory];
    sweep_removes_only_old_leftovers_of_other_runs: [local, seaweed, localstack, memory];
    // moto's fixed upload dates only; the other backends date their uploads truly.
    sweep_on_moto_aborts_young_uploads_too_as_moto_dates_them_2010: [moto];
    list_shows_one_level_with_identity: [local, seaweed, moto, localstack, memory];
    leftovers_lists_unpromoted_staging_until_swept: [local, seaweed, moto, localstack, memory];
    fencing_reports_the_store_and_promote_obeys_it: [local, seaweed, moto, localstack, memory];
}

// Checks for the S3 servers only: the SDK's checksum settings (memory has no wire).
matrix! {
    staging_checksums_follow_the_sdk_setting: [seaweed, moto, localstack];
}

//! What the test modules share: the backends a body runs on ([`Backend`], [`matrix!`]),
//! the S3 test servers (`servers`), one test's world of inbox, lake and runs of the
//! binary (`world`), runs stopped at a pause point or frozen, and signals to them
//! (`paused`), the check of every run against the commit log (`logged`), the
//! fault-injecting proxy (`proxy`), a real Prometheus Pushgateway
//! with its scrape parsed (`pushgateway`), and the reference model that gives every
//! expected byte (`model`).

pub mod logged;
pub mod model;
pub mod paused;
pub mod proxy;
pub mod pushgateway;
pub mod servers;
pub mod world;

pub use model::{expected_publish, expected_publish_with};
pub use paused::{signal, wait_stopped, Paused};
pub use servers::Server;
pub use world::*;

/// A backend a test body runs on: a local lake or one of the S3 test servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Local,
    Seaweed,
    Moto,
    Localstack,
}

impl Backend {
    /// The S3 server; for `Local` this panics, which in the `const` block
    /// that [`matrix!`]'s `s3` entries put it in is a compile error.
    pub const fn server(self) -> Server {
        match self {
            Backend::Local => panic!("`local` is not an S3 server"),
            Backend::Seaweed => Server::Seaweed,
            Backend::Moto => Server::Moto,
            Backend::Localstack => Server::Localstack,
        }
    }
}

impl From<Backend> for Kind {
    /// The lake the binary runs on.
    fn from(b: Backend) -> Kind {
        match b {
            Backend::Local => Kind::Local,
            s3 => Kind::S3(s3.server()),
        }
    }
}

/// The backend matrix: one test per (body, backend), named `<body>::<backend>`. Each
/// backend is written as `local`, `seaweed`, `moto` or `localstack`; any other name
/// is a compile error, and so is `local` in an `s3` entry. Entries, each ending in `;`:
///
/// - `name: [local, seaweed];` calls `name(backend.into())` (a [`Kind`] or a [`Backend`]);
/// - `name: [local, seaweed] => body(args...);` calls `body(backend.into(), args...)`;
/// - `s3 name: [seaweed, moto];` calls `name(server)` with a [`Server`].
macro_rules! matrix {
    (@backend local) => { $crate::support::Backend::Local };
    (@backend seaweed) => { $crate::support::Backend::Seaweed };
    (@backend moto) => { $crate::support::Backend::Moto };
    (@backend localstack) => { $crate::support::Backend::Localstack };
    (@backend $other:ident) => {
        compile_error!(concat!(
            "unknown backend `",
            stringify!($other),
            "` (expected local, seaweed, moto or localstack)"
        ))
    };

    (@call $body:ident $backend:ident ($($arg:expr),* $(,)?)) => {
        super::$body(matrix!(@backend $backend).into(), $($arg),*)
    };

    () => {};
    (s3 $name:ident: [$($backend:ident),+ $(,)?]; $($rest:tt)*) => {
        mod $name {
            $(
                #[test]
                fn $backend() {
                    super::$name(const { matrix!(@backend $backend).server() })
                }
            )+
        }
        matrix!($($rest)*);
    };
    ($name:ident: [$($backend:ident),+ $(,)?] => $body:ident $args:tt; $($rest:tt)*) => {
        mod $name {
            use super::*;
            $(
                #[test]
                fn $backend() {
                    matrix!(@call $body $backend $args)
                }
            )+
        }
        matrix!($($rest)*);
    };
    ($name:ident: [$($backend:ident),+ $(,)?]; $($rest:tt)*) => {
        mod $name {
            $(
                #[test]
                fn $backend() {
                    super::$name(matrix!(@backend $backend).into())
                }
            )+
        }
        matrix!($($rest)*);
    };
}

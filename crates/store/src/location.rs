//! Where an input or a lake lives: a local path or an S3 bucket and key, and what
//! a backend's nature decides for the run (the memory a staged write holds).

use std::path::PathBuf;

use landing_error::{Error, Result};

use crate::s3::S3Options;

/// Where an input or a lake lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local file (input) or folder (lake).
    Local(PathBuf),
    /// An S3 bucket and key (input) or prefix (lake, may be empty).
    S3 { bucket: String, key: String },
}

impl Location {
    pub fn parse(s: &str) -> Result<Self> {
        if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(Error::Config(format!("{s}: an S3 URL needs a bucket")));
            }
            return Ok(Location::S3 {
                bucket: bucket.to_owned(),
                key: key.trim_matches('/').to_owned(),
            });
        }
        if s.is_empty() {
            return Err(Error::Config("empty path".into()));
        }
        Ok(Location::Local(PathBuf::from(s)))
    }

    /// The input name: the last path segment.
    pub fn name(&self) -> Option<&str> {
        match self {
            Location::Local(p) => p.file_name().and_then(|n| n.to_str()),
            Location::S3 { key, .. } => key.rsplit('/').next().filter(|n| !n.is_empty()),
        }
    }

    /// `rel` (a key, or a relative path) under this folder or prefix.
    /// Bytes a staged write to a lake here holds in memory: S3's parts in flight
    /// (those being uploaded and the one being filled); none on a local lake.
    pub fn write_buffer(&self, s3: &S3Options) -> u64 {
        match self {
            Location::S3 { .. } => (s3.part_size as u64) * (s3.upload_concurrency as u64 + 1),
            Location::Local(_) => 0,
        }
    }

    pub fn join(&self, rel: &str) -> Location {
        match self {
            Location::Local(dir) => Location::Local(dir.join(rel)),
            Location::S3 { bucket, key } => Location::S3 {
                bucket: bucket.clone(),
                key: [key.as_str(), rel]
                    .into_iter()
                    .filter(|p| !p.is_empty())
                    .collect::<Vec<_>>()
                    .join("/"),
            },
        }
    }

    /// The inverse of [`Location::join`] for a file or object: its folder or prefix
    /// (`.` for a bare local file name) and its name.
    pub fn split_name(&self) -> Option<(Location, &str)> {
        let name = self.name()?;
        let parent = match self {
            Location::Local(path) => {
                let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
                Location::Local(dir.map_or_else(|| ".".into(), |d| d.to_path_buf()))
            }
            Location::S3 { bucket, key } => Location::S3 {
                bucket: bucket.clone(),
                key: key.rsplit_once('/').map_or("", |(k, _)| k).to_owned(),
            },
        };
        Some((parent, name))
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_join_and_split() {
        for (root, joined) in [
            ("s3://b/in/", "s3://b/in/a.jsonl"),
            ("s3://b", "s3://b/a.jsonl"),
            ("/in", "/in/a.jsonl"),
        ] {
            let root = Location::parse(root).unwrap();
            let file = root.join("a.jsonl");
            assert_eq!(file.to_string(), joined);
            let (parent, name) = file.split_name().unwrap();
            assert_eq!((parent, name), (root.clone(), "a.jsonl"));
        }
        let bare = Location::parse("a.jsonl").unwrap();
        assert_eq!(bare.split_name().unwrap().0.to_string(), ".");
        let scratch = Location::parse("s3://b/lake").unwrap().join("drills/d-1/x");
        assert_eq!(scratch.to_string(), "s3://b/lake/drills/d-1/x");
    }

    #[test]
    fn parses_s3_and_local_locations() {
        assert_eq!(
            Location::parse("s3://b/p/q/").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                key: "p/q".into()
            }
        );
        assert_eq!(
            Location::parse("s3://b").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                key: "".into()
            }
        );
        assert!(Location::parse("s3:///k").is_err());
        assert_eq!(
            Location::parse("lake").unwrap(),
            Location::Local(PathBuf::from("lake"))
        );
    }
}

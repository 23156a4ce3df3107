//! Choosing an inbox's inputs: the `--match` glob and the `--shard I/N` split.
//!
//! **The shard hash is fixed** (changing it would move inputs between the pods of a
//! running backfill): shard of a name = the first 8 bytes of the SHA-256 of the
//! name's UTF-8 bytes, read as a big-endian unsigned 64-bit integer, modulo N. The N
//! shards are therefore disjoint and together cover every name; the unit tests pin
//! known values.

use sha2::{Digest, Sha256};

/// `--shard I/N`: this pod takes the names whose hash modulo `count` is `index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    pub fn new(index: u64, count: u64) -> Result<Self, String> {
        if count == 0 || index >= count {
            return Err(format!("shard {index}/{count}: need 0 <= I < N and N >= 1"));
        }
        Ok(Shard { index, count })
    }

    /// Does this shard take `name`?
    pub fn takes(&self, name: &str) -> bool {
        shard_of(name, self.count) == self.index
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("--shard {s:?}: expected I/N, e.g. 0/3"))?;
        let parse = |v: &str| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("--shard {s:?}: expected I/N with whole numbers"))
        };
        Shard::new(parse(i)?, parse(n)?).map_err(|e| format!("--shard: {e}"))
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The stable shard hash: first 8 bytes of SHA-256(name), big-endian.
pub fn name_hash(name: &str) -> u64 {
    let digest = Sha256::digest(name.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The shard (0..count) a name belongs to.
pub fn shard_of(name: &str, count: u64) -> u64 {
    name_hash(name) % count.max(1)
}

/// Shell-style name patterns, separated by commas; a name matches if it matches any
/// of them. In each, `*` matches any run of characters (empty included), `?`
/// exactly one character, anything else itself. Names never hold `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: String,
}

/// `--match`'s default: plain, gzip and zstd JSONL.
pub const DEFAULT_MATCH: &str = "*.jsonl,*.jsonl.gz,*.jsonl.zst";

impl Glob {
    pub fn new(pattern: &str) -> Result<Self, String> {
        if pattern.split(',').any(str::is_empty) || pattern.contains('/') {
            return Err(format!(
                "--match {pattern:?}: name patterns separated by commas, each non-empty and without '/'"
            ));
        }
        Ok(Glob {
            pattern: pattern.to_owned(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// Does `name` match any of the patterns?
    pub fn matches(&self, name: &str) -> bool {
        self.pattern.split(',').any(|p| matches_one(p, name))
    }
}

/// Iterative wildcard match with one backtrack point: linear in practice, never
/// exponential.
fn matches_one(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == n[ni])) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_hash_is_pinned() {
        // SHA-256("progress-2026-03-02.jsonl") starts with these 8 bytes; the hash
        // must never change, or a running backfill would move inputs between pods.
        let d = Sha256::digest(b"progress-2026-03-02.jsonl");
        let mut first = [0u8; 8];
        first.copy_from_slice(&d[..8]);
        assert_eq!(
            name_hash("progress-2026-03-02.jsonl"),
            u64::from_be_bytes(first)
        );
        // Known values, computed once with `printf %s NAME | sha256sum`.
        assert_eq!(name_hash(""), 0xe3b0_c442_98fc_1c14);
        assert_eq!(name_hash("abc"), 0xba78_16bf_8f01_cfea);
        assert_eq!(shard_of("abc", 3), 0xba78_16bf_8f01_cfea % 3);
        assert_eq!(shard_of("abc", 1), 0);
        // Computed with Python's hashlib: int.from_bytes(sha256(name)[:8], "big") % N.
        assert_eq!(shard_of("progress-2026-03-02.jsonl", 3), 1);
        assert_eq!(shard_of("progress-2026-03-02.jsonl", 7), 5);
        assert_eq!(shard_of("a.jsonl", 3), 2);
    }

    #[test]
    fn a_shard_and_a_glob_say_what_they_were_given() {
        assert_eq!(Shard::new(1, 3).unwrap().to_string(), "1/3");
        assert_eq!(Glob::new("a*,b?").unwrap().as_str(), "a*,b?");
    }

    #[test]
    fn shards_are_disjoint_and_cover() {
        for n in 1..6u64 {
            for i in 0..200 {
                let name = format!("progress-{i}.jsonl");
                let takers = (0..n)
                    .filter(|&k| Shard::new(k, n).unwrap().takes(&name))
                    .count();
                assert_eq!(takers, 1, "{name} in {n} shards");
            }
        }
    }

    #[test]
    fn shard_parses() {
        assert_eq!("1/3".parse::<Shard>().unwrap(), Shard::new(1, 3).unwrap());
        assert!("3/3".parse::<Shard>().is_err());
        assert!("0/0".parse::<Shard>().is_err());
        assert!("1".parse::<Shard>().is_err());
        assert!("a/3".parse::<Shard>().is_err());
    }

    #[test]
    fn glob_matches_names() {
        let g = Glob::new("*.jsonl").unwrap();
        assert!(g.matches("a.jsonl"));
        assert!(g.matches(".jsonl"));
        assert!(!g.matches("a.jsonl.tmp"));
        assert!(!g.matches("a.json"));
        let g = Glob::new("progress-2026-??-*.jsonl").unwrap();
        assert!(g.matches("progress-2026-03-02.jsonl"));
        assert!(!g.matches("progress-2026-3-02.jsonl"));
        assert!(Glob::new("*").unwrap().matches("anything"));
        assert!(Glob::new("a*b*c").unwrap().matches("aXbYbZc"));
        assert!(!Glob::new("a*b*c").unwrap().matches("aXbYbZ"));
        assert!(Glob::new("a/b").is_err());
        let d = Glob::new(DEFAULT_MATCH).unwrap();
        for name in ["a.jsonl", "a.jsonl.gz", "a.jsonl.zst"] {
            assert!(d.matches(name), "{name}");
        }
        assert!(!d.matches("a.jsonl.bz2") && !d.matches("a.gz"));
        assert!(Glob::new("*.jsonl,").is_err());
        assert!(Glob::new(",").is_err());
    }
}

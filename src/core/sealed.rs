//! The bytes a window state keeps for an aggregate whose transition state is `internal`
//! (`stddev(numeric)`, `variance(bigint)`, a user's aggregate written in C): the aggregate's
//! own serialization, sealed. The seal carries the server major version that wrote it, which
//! alone may read it back (a serialization is the server's private format and changes between
//! majors), and a MAC keyed with the database's own secret, so that bytes no pipeline wrote are
//! never handed to a deserialization function (which trusts its input as PostgreSQL's parallel
//! workers give it).
//!
//! Layout: `ETs1`, the major (2 bytes, big-endian), the MAC (32 bytes), the serialization. The
//! MAC is HMAC-SHA256 over the tag, the major, the serialization function's name and the
//! serialization.

use hmac::{Hmac, Mac};
use sha2::Sha256;

const TAG: &[u8; 4] = b"ETs1";
const MAC_LEN: usize = 32;
const HEADER: usize = TAG.len() + 2 + MAC_LEN;

/// Why sealed bytes cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsealed {
    /// Written by another server major version.
    OtherMajor(u16),
    /// Not written by a pipeline of this database for this serialization function.
    Foreign,
}

fn mac(key: &[u8], major: u16, function: &str, payload: &[u8]) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    m.update(TAG);
    m.update(&major.to_be_bytes());
    m.update(&(function.len() as u32).to_be_bytes());
    m.update(function.as_bytes());
    m.update(payload);
    m
}

/// The sealed form of `payload`, the output of serialization function `function`.
pub fn seal(key: &[u8], major: u16, function: &str, payload: &[u8]) -> Vec<u8> {
    let tag = mac(key, major, function, payload).finalize().into_bytes();
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(TAG);
    out.extend_from_slice(&major.to_be_bytes());
    out.extend_from_slice(&tag);
    out.extend_from_slice(payload);
    out
}

/// The serialization inside `bytes`, if this server (`major`) may read it.
pub fn open<'a>(
    key: &[u8],
    major: u16,
    function: &str,
    bytes: &'a [u8],
) -> Result<&'a [u8], Unsealed> {
    if bytes.len() < HEADER || &bytes[..TAG.len()] != TAG {
        return Err(Unsealed::Foreign);
    }
    let written = u16::from_be_bytes([bytes[4], bytes[5]]);
    let payload = &bytes[HEADER..];
    // The major is checked after the MAC: a foreign value must not pass for an old one.
    mac(key, written, function, payload)
        .verify_slice(&bytes[6..HEADER])
        .map_err(|_| Unsealed::Foreign)?;
    if written != major {
        return Err(Unsealed::OtherMajor(written));
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a database's secret of 32 bytes!";
    const F: &str = "pg_catalog.numeric_serialize(internal)";

    #[test]
    fn a_sealed_state_opens_on_the_major_that_wrote_it() {
        let s = seal(KEY, 15, F, b"\x00\x01state");
        assert_eq!(open(KEY, 15, F, &s), Ok(&b"\x00\x01state"[..]));
        assert_eq!(open(KEY, 16, F, &s), Err(Unsealed::OtherMajor(15)));
        let empty = seal(KEY, 18, F, b"");
        assert_eq!(open(KEY, 18, F, &empty), Ok(&b""[..]));
    }

    #[test]
    fn bytes_no_pipeline_sealed_are_refused() {
        let s = seal(KEY, 15, F, b"state");
        // Another key, another function, a changed byte anywhere, a cut, a raw serialization.
        assert_eq!(open(b"another key", 15, F, &s), Err(Unsealed::Foreign));
        assert_eq!(
            open(KEY, 15, "pg_catalog.int8_avg_serialize(internal)", &s),
            Err(Unsealed::Foreign)
        );
        for i in 0..s.len() {
            let mut t = s.clone();
            t[i] ^= 0x40;
            assert_eq!(open(KEY, 15, F, &t), Err(Unsealed::Foreign), "byte {i}");
        }
        assert_eq!(open(KEY, 15, F, &s[..s.len() - 1]), Err(Unsealed::Foreign));
        assert_eq!(open(KEY, 15, F, b"state"), Err(Unsealed::Foreign));
        // A forged major is not taken for an old state.
        let mut t = s.clone();
        t[5] = 14;
        assert_eq!(open(KEY, 15, F, &t), Err(Unsealed::Foreign));
    }
}

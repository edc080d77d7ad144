//! `bench --serve`: the harness kept running between rounds, for `overhead`. One process does
//! every round, so a round costs no fork, exec, dynamic linking or buffer set-up, and the two
//! rounds of a pair are milliseconds apart instead of tens of them: on a shared VM the level of
//! an openat drifts with time, so what a pair's difference cannot cancel grows with the time
//! between its rounds (`scripts/drift-by-lag.py` measures it; docs/overhead-method.md has figures).
//!
//! The protocol, on the pipes `overhead` holds: each byte read from stdin runs one round (the
//! warm-up dropped as in a plain run) and answers on stdout with the count of kept samples, a
//! little-endian `u32`, then the samples (ns) as little-endian `u32`s, every worker's in turn.
//! End of stdin ends the server; so does a closed stdout.

use super::{prepare, validate, workers, BenchOptions};
use anyhow::Result;
use std::io::{ErrorKind, Read, Write};

/// Serve rounds until `input` ends or `output` is closed.
pub fn serve(opts: &BenchOptions, input: &mut impl Read, output: &mut impl Write) -> Result<()> {
    validate(opts)?;
    let (prepared, _ws) = prepare(opts)?;
    let mut go = [0u8; 1];
    loop {
        match input.read(&mut go) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
        let rs = workers::run(opts, &prepared)?;
        let frame = encode(rs.iter().flat_map(|r| r.samples.iter().copied()));
        match output.write_all(&frame).and_then(|()| output.flush()) {
            Err(e) if e.kind() == ErrorKind::BrokenPipe => return Ok(()),
            other => other?,
        }
    }
}

/// One round's answer: the count, then the samples, each a little-endian `u32`.
pub fn encode(samples: impl Iterator<Item = u64>) -> Vec<u8> {
    let mut v = vec![0u8; 4];
    let mut n: u32 = 0;
    for s in samples {
        v.extend_from_slice(&u32::try_from(s).unwrap_or(u32::MAX).to_le_bytes());
        n += 1;
    }
    v[..4].copy_from_slice(&n.to_le_bytes());
    v
}

/// Read one round's answer from `input`; `None` when it ends before the first byte.
pub fn decode(input: &mut impl Read) -> std::io::Result<Option<Vec<u64>>> {
    let mut head = [0u8; 4];
    match input.read_exact(&mut head) {
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(None),
        other => other?,
    }
    let n = u32::from_le_bytes(head) as usize;
    let mut body = vec![0u8; n * 4];
    input.read_exact(&mut body)?;
    Ok(Some(
        body.chunks_exact(4)
            .map(|c| u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let frame = encode([1u64, 2_000, u64::from(u32::MAX) + 5].into_iter());
        assert_eq!(frame.len(), 16);
        let mut r = &frame[..];
        assert_eq!(
            decode(&mut r).unwrap(),
            Some(vec![1, 2_000, u64::from(u32::MAX)])
        );
        assert_eq!(decode(&mut r).unwrap(), None, "nothing after the frame");
        let cut = &frame[..9];
        assert!(
            decode(&mut &cut[..]).is_err(),
            "a frame cut short is an error"
        );
    }

    #[test]
    fn serves_a_round_per_byte_until_stdin_ends() {
        let opts = BenchOptions::openat("/", 50);
        let mut out = Vec::new();
        serve(&opts, &mut &b"gg"[..], &mut out).unwrap();
        let mut r = &out[..];
        for _ in 0..2 {
            let s = decode(&mut r).unwrap().expect("a round");
            assert_eq!(s.len(), 45, "50 iterations less 10% warm-up");
            assert!(s.iter().all(|&x| x > 0));
        }
        assert_eq!(decode(&mut r).unwrap(), None);
    }
}

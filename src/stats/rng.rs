//! A small seeded random number generator: the coin that orders `overhead`'s pairs of rounds,
//! and the simulations of the tests and examples.
//!
//! SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA
//! 2014) has one 64-bit state, passes BigCrush, and is reproducible from a seed, which is all
//! these need. It is not for cryptography.

/// SplitMix64 with the samplers the statistics need.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

/// A seed no two runs share: 53 bits from the kernel's random pool (`getrandom`), or the clock
/// and pid should that fail; 53 so that a JSON reader holding numbers as doubles (JavaScript,
/// jq 1.6) gives back the seed exactly. `overhead` draws its coin from one per run unless `--seed` is given,
/// so that repeated runs are independent draws of the coin, as the interval's coverage assumes.
pub(crate) fn fresh_seed() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom(2) writes at most bytes.len() bytes into bytes.
    let written = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    const BITS53: u64 = (1 << 53) - 1;
    if written == bytes.len() as isize {
        return u64::from_le_bytes(bytes) & BITS53;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Rng::new(nanos ^ u64::from(std::process::id()) << 32).next_u64() & BITS53
}

impl Rng {
    /// A generator whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    /// Uniform on the open interval (0, 1): never 0, so `ln` of it is finite.
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `0..bound` (`bound > 0`); the modulo bias is below 2^-40 for a bound
    /// below 2^24.
    pub fn below(&mut self, bound: usize) -> usize {
        (self.next_u64() % bound as u64) as usize
    }

    /// Standard normal (Marsaglia's polar method; the second value is dropped for simplicity).
    pub fn normal(&mut self) -> f64 {
        loop {
            let first = 2.0 * self.uniform() - 1.0;
            let second = 2.0 * self.uniform() - 1.0;
            let radius = first * first + second * second;
            if radius < 1.0 && radius > 0.0 {
                return first * (-2.0 * radius.ln() / radius).sqrt();
            }
        }
    }

    /// Gamma(shape, 1) for `shape >= 1` (Marsaglia & Tsang, ACM TOMS 26(3), 2000).
    pub fn gamma(&mut self, shape: f64) -> f64 {
        let offset = shape - 1.0 / 3.0;
        let scale = 1.0 / (9.0 * offset).sqrt();
        loop {
            let normal = self.normal();
            let cubed = (1.0 + scale * normal).powi(3);
            if cubed <= 0.0 {
                continue;
            }
            let uniform = self.uniform();
            if uniform.ln() < 0.5 * normal * normal + offset - offset * cubed + offset * cubed.ln()
            {
                return offset * cubed;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_var(xs: &[f64]) -> (f64, f64) {
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
        (m, v)
    }

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
    }

    #[test]
    fn sampler_moments_table() {
        // (name, sampler, mean, variance) with known answers.
        type Sampler = fn(&mut Rng) -> f64;
        let cases: &[(&str, Sampler, f64, f64)] = &[
            ("uniform", |r| r.uniform(), 0.5, 1.0 / 12.0),
            ("normal", |r| r.normal(), 0.0, 1.0),
            ("gamma(3)", |r| r.gamma(3.0), 3.0, 3.0),
            ("gamma(40)", |r| r.gamma(40.0), 40.0, 40.0),
        ];
        let mut rng = Rng::new(42);
        for (name, f, mean, var) in cases {
            let xs: Vec<f64> = (0..40_000).map(|_| f(&mut rng)).collect();
            let (m, v) = mean_var(&xs);
            let se = (var / xs.len() as f64).sqrt();
            assert!((m - mean).abs() < 5.0 * se, "{name}: mean {m} vs {mean}");
            assert!((v / var - 1.0).abs() < 0.05, "{name}: var {v} vs {var}");
        }
    }
}

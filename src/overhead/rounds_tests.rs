//! The stop rules, the looks of a target and the sentences of how the rounds ended.

use super::*;

fn budget(seconds: f64) -> Stop {
    Stop::Adaptive {
        target_ns: None,
        budget: Duration::from_secs_f64(seconds),
    }
}

#[test]
fn stop_rules() {
    let ms = Duration::from_millis;
    assert_eq!(Stop::Pairs(3).before_pair(2, ms(10), ms(1)), None);
    assert_eq!(
        Stop::Pairs(3).before_pair(3, ms(10), ms(1)),
        Some(StopReason::Rounds)
    );
    let short = Stop::Adaptive {
        target_ns: Some(10.0),
        budget: Duration::from_secs(1),
    };
    // 0.9 s in, pairs of 0.3 s: the next would end at 1.2 s, past the budget.
    assert_eq!(
        short.before_pair(3, ms(900), ms(300)),
        Some(StopReason::Time)
    );
    assert_eq!(short.before_pair(3, ms(600), ms(200)), None);
    assert_eq!(short.before_pair(0, ms(0), ms(0)), None);
    // (pairs, width, stops on target): at the looks only, and only within the target.
    for (pairs, width, stops) in [
        (MIN_PAIRS - 1, Some(3.0), false),
        (MIN_PAIRS, Some(9.9), true),
        (MIN_PAIRS, Some(10.1), false),
        (MIN_PAIRS + 1, Some(3.0), false),
        (150, Some(3.0), true),
        (150, None, false),
    ] {
        assert_eq!(
            short.after_pair(pairs, MIN_PAIRS, width).is_some(),
            stops,
            "{pairs} {width:?}"
        );
    }
    assert_eq!(Stop::Pairs(3).after_pair(30, 30, Some(1.0)), None);
    assert_eq!(short.after_load(MIN_LOADS - 1, Some(1.0)), None);
    assert_eq!(
        short.after_load(MIN_LOADS, Some(1.0)),
        Some(StopReason::Target)
    );
    assert_eq!(budget(60.0).after_load(MIN_LOADS, Some(0.1)), None);
    assert_eq!(
        (share(10, 0, 3), share(10, 1, 3), share(10, 2, 3)),
        (3, 3, 4)
    );
}

#[test]
fn looks_grow_by_half() {
    let looks: Vec<usize> = (0..2_000).filter(|&p| is_look(p, 360)).collect();
    assert_eq!(looks, [360, 540, 810, 1215, 1822]);
    // The first look: enough blocks for p99.9 at the level, and never under MIN_PAIRS.
    let q = [50.0, 90.0, 99.0, 99.9];
    assert_eq!(first_look(225, &q, 0.99), 8 * 45);
    assert_eq!(first_look(225, &q, 0.95), 6 * 45);
    assert_eq!(first_look(1800, &q, 0.99), MIN_PAIRS);
    assert_eq!(first_look(225, &[50.0], 0.99), MIN_PAIRS);
}

#[test]
fn ended_sentences() {
    let e = Ended {
        reason: StopReason::Target,
        pairs: 48,
        loads: 6,
        seconds: 5.12,
        p50_width_ns: Some(9.63),
        target_ns: Some(10.0),
        max_time_s: Some(12.0),
    };
    assert_eq!(
        e.sentence(),
        "stopped: the p50 interval was 9.6 ns wide, within the 10 ns target, after 48 pairs over 6 loads (5.1 s)"
    );
    let t = Ended {
        reason: StopReason::Time,
        target_ns: None,
        loads: 1,
        ..e.clone()
    };
    assert_eq!(
        t.sentence(),
        "48 pairs of rounds in the 12 s budget; the p50 interval is 9.6 ns wide"
    );
    let r = Ended {
        reason: StopReason::Rounds,
        target_ns: None,
        max_time_s: None,
        ..e
    };
    assert_eq!(
        r.sentence(),
        "48 pairs of rounds over 6 loads as asked (5.1 s)"
    );
}

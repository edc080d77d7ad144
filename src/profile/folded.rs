//! Folded stacks (`frame;frame;frame COUNT`) as text: what kind of input a file is, `perf
//! script` text collapsed by inferno's perf collapser, and the frame-name helpers of the
//! folded spelling. The lines are parsed into the typed profile elsewhere (`stacks.rs`).

use anyhow::{Context, Result};
use inferno::collapse::perf::{Folder, Options};
use inferno::collapse::Collapse;
use std::io::{BufRead, BufReader, Read};

/// What a profile input file holds, told by its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// perf's binary file (magic `PERFILE2`).
    PerfData,
    /// The text `perf script` prints.
    PerfScript,
    /// Folded stacks.
    Folded,
}

/// Tell the kind of input from its first bytes (at least its first line); `Err` says why it is
/// neither, naming the first line that fits no kind. Bytes that are not UTF-8 are read as `?`:
/// a frame name may hold any byte.
pub fn detect(head: &[u8]) -> Result<InputKind, String> {
    if super::perfdata::is_perf_data(head) {
        return Ok(InputKind::PerfData);
    }
    if head.starts_with(b"PERFFILE") {
        return Err(
            "it is a perf.data of the old v1 format: record again with a current perf".into(),
        );
    }
    let text = String::from_utf8_lossy(head);
    let complete = text.rfind('\n').map_or(&text[..], |index| &text[..index]);
    let mut lines = complete
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty() && !line.starts_with('#'))
        .peekable();
    if lines.peek().is_none() {
        return Err("no line of text with a stack in it".into());
    }
    let mut folded_like = 0;
    for (index, line) in lines.take(20) {
        if line.starts_with([' ', '\t']) {
            return Ok(InputKind::PerfScript);
        }
        if folded_shape(line) {
            folded_like += 1;
        } else if folded_like == 0 && !looks_like_event_line(line) {
            return Err(format!(
                "line {} is neither an event line of `perf script` nor a folded stack (`frame;frame COUNT`): {:?}",
                index + 1,
                line.chars().take(80).collect::<String>()
            ));
        }
    }
    if folded_like > 0 {
        Ok(InputKind::Folded)
    } else {
        Err("no indented frame lines (perf script) and no `frames COUNT` lines (folded)".into())
    }
}

/// `frames COUNT` with a count of digits (of any length: one too big for 64 bits is still a
/// folded line, refused naming its line when the stacks are parsed).
fn folded_shape(line: &str) -> bool {
    line.trim_end()
        .rsplit_once(' ')
        .is_some_and(|(stack, count)| {
            let digits = count.split_once('.').map_or(count, |(d, _)| d);
            !stack.is_empty() && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        })
}

/// A `perf script` event line: `comm pid[/tid] [cpu] time: period event:`.
fn looks_like_event_line(line: &str) -> bool {
    line.split_whitespace()
        .any(|w| w.ends_with(':') && w.trim_end_matches(':').parse::<f64>().is_ok())
}

/// Collapse `perf script` text into folded lines. Kernel frames get inferno's `_[k]` suffix so
/// the flame graph can tell them from user and BPF frames (BPF frames' DSO is their own symbol,
/// not `[kernel.kallsyms]`, so they stay unannotated).
///
/// Bytes outside ASCII are replaced by `?` on the way in, because inferno 0.12 slices symbol
/// names at byte offsets and panics inside a multi-byte character.
///
/// inferno takes the event to keep from the first sample's header line, and asserts that it
/// found one when the first block ends. Text whose first block has no such line, such as a
/// blank line first or a header split in two, made it panic. So the event is looked up here
/// the way inferno reads it and handed to inferno: wherever inferno makes a choice, the choice
/// is its own, and where it would have asserted, the search goes on into the blocks after.
pub fn collapse_perf_script(reader: impl Read) -> Result<Vec<u8>> {
    let mut input = BufReader::with_capacity(1 << 16, AsciiOnly(reader));
    let scan = first_event(&mut input).context("cannot read the perf script output")?;
    let event = match scan.event {
        Some(found) => Some(found),
        // inferno reads text with no header and no blank line to its end without asserting:
        // let it, as before.
        None if !scan.blank && scan.complete => None,
        None if scan.seen.iter().all(u8::is_ascii_whitespace) => return Ok(Vec::new()),
        None => return Err(no_header(scan.complete)),
    };
    let mut opts = Options::default();
    opts.annotate_kernel = true;
    opts.annotate_jit = true;
    opts.event_filter = event;
    let mut out = Vec::new();
    let all = std::io::Cursor::new(scan.seen).chain(input);
    Folder::from(opts)
        .collapse(BufReader::with_capacity(1 << 16, all), &mut out)
        .context("cannot collapse perf script output")?;
    Ok(out)
}

/// The error for text in which no sample header names an event (`complete`: in all of it).
fn no_header(complete: bool) -> anyhow::Error {
    let within = match complete {
        true => String::new(),
        false => format!(" in its first {} MB", HEADER_SCAN >> 20),
    };
    crate::error::usage(format!(
        "the perf script text has no sample header line (`COMM PID TIME: PERIOD EVENT:`){within}: give the output of `perf script`, or the perf.data itself"
    ))
}

/// What [`first_event`] found.
struct HeaderScan {
    /// The event inferno would keep.
    event: Option<String>,
    /// The bytes read to find it.
    seen: Vec<u8>,
    /// A blank line came before the event: inferno would have asserted at it.
    blank: bool,
    /// The text was read to its end.
    complete: bool,
}

/// How far [`first_event`] looks for a sample header before giving up on the text.
const HEADER_SCAN: usize = 16 << 20;

/// The event inferno would keep ([`HeaderScan`]). inferno's reader
/// (`collapse::perf::Folder::process_single_stack` and `on_event_line`) reads each line that
/// comes outside a sample as a header: one it cannot parse leaves it outside (the next line is
/// tried), one it parses starts a sample (its frames follow to a blank line), and the first
/// header with an event sets the event. inferno reads only the first block so; this goes on
/// into the blocks after it, where inferno asserted. Lines starting `#` are skipped.
fn first_event(input: &mut impl BufRead) -> std::io::Result<HeaderScan> {
    let mut scan = HeaderScan {
        event: None,
        seen: Vec::new(),
        blank: false,
        complete: false,
    };
    let mut in_sample = false;
    while scan.seen.len() < HEADER_SCAN {
        let from = scan.seen.len();
        let room = (HEADER_SCAN - from) as u64;
        if input
            .by_ref()
            .take(room)
            .read_until(b'\n', &mut scan.seen)?
            == 0
        {
            scan.complete = true;
            break;
        }
        let line = String::from_utf8_lossy(&scan.seen[from..]);
        if line.starts_with('#') {
            continue;
        }
        let line = line.trim_end();
        if line.is_empty() {
            in_sample = false;
            scan.blank = true;
        } else if !in_sample {
            match header(line) {
                Some(Some(event)) => {
                    scan.event = Some(event.to_string());
                    break;
                }
                Some(None) => in_sample = true,
                None => {}
            }
        }
    }
    Ok(scan)
}

/// A sample header line as inferno 0.12 reads it (`event_line_parts`, `on_event_line`): after
/// the first all-digit word (the tid, or pid/tid) comes `TIME: PERIOD EVENT:`, the event being
/// the last word before the second colon. `None`: not a header; `Some(None)`: a header that
/// names no event.
fn header(line: &str) -> Option<Option<&str>> {
    let mut all_digits = false;
    let mut last_was_space = false;
    let mut end = None;
    for (idx, character) in line.char_indices() {
        if character == ' ' {
            if all_digits && !last_was_space {
                end = Some(idx + 1);
                break;
            }
            all_digits = true;
        } else if !(character.is_ascii_digit() || character == '/') {
            all_digits = false;
        }
        last_was_space = character == ' ';
    }
    let period_and_event = line[end?..].split(':').nth(1);
    Some(period_and_event.and_then(|p| p.rsplit(' ').next()))
}

/// A reader that turns every byte ≥ 0x80 into `?`, and every `;` into `:`. inferno writes a `;`
/// in a function name as `:` but keeps one in a process name, where it would split the folded
/// line's first frame in two; here both are written as inferno writes the first.
struct AsciiOnly<R>(R);

impl<R: Read> Read for AsciiOnly<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let count = self.0.read(buf)?;
        for byte in &mut buf[..count] {
            if *byte >= 0x80 {
                *byte = b'?';
            } else if *byte == b';' {
                *byte = b':';
            }
        }
        Ok(count)
    }
}

/// A frame name with `_[k]`/`_[j]` annotations removed.
pub fn bare(frame: &str) -> &str {
    frame
        .strip_suffix("_[k]")
        .or_else(|| frame.strip_suffix("_[j]"))
        .unwrap_or(frame)
}

/// Drop characters XML 1.0 cannot hold (C0 controls but tab), so any frame name renders into a
/// valid SVG.
pub fn sanitize(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |character: char| {
        (character < ' ' && character != '\t' && character != '\n')
            || character == '\u{7f}'
            || character == '\u{fffe}'
            || character == '\u{ffff}'
    };
    if text.chars().any(bad) {
        text.chars()
            .filter(|&character| !bad(character))
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = include_str!("../../fixtures/perf-script/openat-hook.txt");

    #[test]
    fn detects_each_kind() {
        assert_eq!(detect(b"PERFILE2\x10\x00"), Ok(InputKind::PerfData));
        assert_eq!(detect(SCRIPT.as_bytes()), Ok(InputKind::PerfScript));
        assert_eq!(
            detect(b"bench;do_syscall_64_[k] 12\nbench;x 3\n"),
            Ok(InputKind::Folded)
        );
        assert!(detect(b"").is_err());
        assert!(detect(b"\x00\x01\x02garbage").is_err());
        let e = detect(b"hello world\n").unwrap_err();
        assert!(e.contains("line 1 is neither"), "{e}");
    }

    /// A valid folded file whose first frame is longer than 4096 bytes, or holds a byte that
    /// is not UTF-8, was refused as neither kind.
    #[test]
    fn regression_long_or_non_utf8_first_frame_is_still_folded() {
        let long = format!("{};leaf 7\nb 1\n", "f".repeat(5000));
        assert_eq!(detect(long.as_bytes()), Ok(InputKind::Folded));
        assert_eq!(detect(b"bench;caf\xe9_[k];x 3\n"), Ok(InputKind::Folded));
    }

    #[test]
    fn collapses_real_script_with_bpf_frames() {
        let out = String::from_utf8(collapse_perf_script(SCRIPT.as_bytes()).unwrap()).unwrap();
        assert!(out.lines().count() > 0);
        let bpf = out
            .lines()
            .filter(|line| line.contains("path_check_callback"))
            .count();
        assert!(bpf > 0, "{out}");
        assert!(
            out.contains("do_syscall_64_[k]"),
            "kernel frames are annotated"
        );
        assert!(
            !out.contains("path_check_callback_[k]"),
            "BPF frames are not"
        );
    }

    /// A first block without a sample header made inferno assert: a blank line first, or the
    /// first header split in two. The rest is still read, with the event of the first header
    /// found.
    #[test]
    fn regression_no_header_in_the_first_block_panicked_inferno() {
        let stack =
            "bench 7 1.5: 1 cpu-clock:k:\n\tffffffff81000130 f+0x76 ([kernel.kallsyms])\n\n";
        let other = "bench 7 1.6: 1 task-clock:\n\tffffffff81000130 g+0x76 ([kernel.kallsyms])\n\n";
        let split =
            "bench 7   1\n.4: 1 cpu-clock:k:\n\tffffffff81000130 h+0x1 ([kernel.kallsyms])\n\n";
        for (text, want) in [
            (format!("\n{stack}{other}"), "bench;f_[k] 1\n"),
            (format!("# comment\n\n\n{stack}{other}"), "bench;f_[k] 1\n"),
            // A block whose header names no event is kept, as inferno keeps it further on.
            (
                format!("{split}{stack}{other}"),
                "bench;f_[k] 1\nbench;h_[k] 1\n",
            ),
        ] {
            let out = String::from_utf8(collapse_perf_script(text.as_bytes()).unwrap()).unwrap();
            assert_eq!(out, want, "{text:?}");
        }
        assert_eq!(
            header("bench 7 1.5: 1 cpu-clock:k:"),
            Some(Some("cpu-clock"))
        );
        assert_eq!(
            header("bench 7/8 [001] 1.5: 1 cycles:k:"),
            Some(Some("cycles"))
        );
        assert_eq!(header("bench 7   1"), Some(None), "a header with no event");
        assert_eq!(
            header("bench 1.5:"),
            None,
            "no all-digit word: not a header"
        );
        // A line inferno cannot read as a header leaves it outside a sample: the next line is
        // a header, whose event inferno keeps (not the next block's).
        let text = format!("bench 1.5:\n{stack}{other}");
        let out = String::from_utf8(collapse_perf_script(text.as_bytes()).unwrap()).unwrap();
        assert_eq!(out, "bench;f_[k] 1\n");
        let alone = "bench 1.5:\nbench 7 1.5: 1 cpu-clock:\n\tffffffff81000130 f+0x76 ([kernel.kallsyms])\n";
        let out = String::from_utf8(collapse_perf_script(alone.as_bytes()).unwrap()).unwrap();
        assert_eq!(out, "bench;f_[k] 1\n", "no error where inferno read it");
        assert!(collapse_perf_script("\n\n  \n".as_bytes())
            .unwrap()
            .is_empty());
        // No header and no blank line: inferno read it to the end (nothing to fold), as before.
        let none = collapse_perf_script("no header here\n\tf\n".as_bytes()).unwrap();
        assert!(none.is_empty());
        // A blank line with no header before it, and none after: where inferno asserted.
        let e = collapse_perf_script("no header here\n\tf\n\n".as_bytes()).unwrap_err();
        assert!(e.to_string().contains("no sample header line"), "{e}");
    }

    #[test]
    fn regression_non_ascii_symbol_panicked_inferno() {
        let text = "bench 1 1.0: 1 cpu-clock:k:\n\tffffffff81000130 entry_SYSCALL\u{fffd}64_after_hwframe+0x76 ([kernel.kallsyms])\n\n";
        let out = String::from_utf8(collapse_perf_script(text.as_bytes()).unwrap()).unwrap();
        assert!(out.contains("entry_SYSCALL???64_after_hwframe"), "{out}");
    }

    #[test]
    fn regression_a_semicolon_in_a_process_name_does_not_split_its_frame() {
        let script = "my;comm 123 [000] 1.000000: 1 cycles:k: \n\tffffffff81000000 do_sys_open+0x0 ([kernel.kallsyms])\n\n";
        let folded = String::from_utf8(collapse_perf_script(script.as_bytes()).unwrap()).unwrap();
        assert_eq!(folded.trim_end(), "my:comm;do_sys_open_[k] 1");
    }

    #[test]
    fn sanitize_drops_xml_illegal() {
        assert_eq!(sanitize("a\x1b[31mb\x00c"), "a[31mbc");
        assert_eq!(sanitize("plain<script>"), "plain<script>");
        assert_eq!(bare("do_syscall_64_[k]"), "do_syscall_64");
    }
}

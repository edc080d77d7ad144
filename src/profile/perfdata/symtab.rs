//! A sorted symbol table with perf's rules for sizes and aliases, shared by kallsyms and ELF
//! symbols: zero-sized symbols end where the next one starts (`symbols__fixup_end`), one
//! symbol is kept per address (`symbols__fixup_duplicate` + `choose_best_symbol`), and an
//! address resolves to the symbol whose `[start, end)` holds it (`symbols__find`).
//!
//! Source: `tools/perf/util/symbol.c` of perf 6.1.

/// `STB_LOCAL`.
pub(crate) const LOCAL: u8 = 0;
/// `STB_GLOBAL`.
pub(crate) const GLOBAL: u8 = 1;
/// `STB_WEAK`.
pub(crate) const WEAK: u8 = 2;

/// One symbol; its name lives in the table's arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sym {
    pub start: u64,
    pub end: u64,
    pub binding: u8,
    name_at: u32,
    name_len: u32,
}

/// Symbols sorted by start, names in one string.
#[derive(Debug, Clone, Default)]
pub(crate) struct SymTab {
    syms: Vec<Sym>,
    names: String,
}

/// perf's `roundup(x, 4096)`, wrapping like C's u64 arithmetic.
fn roundup_page(addr: u64) -> u64 {
    addr.wrapping_add(4095) & !4095
}

impl SymTab {
    /// Add a symbol of `len` bytes (0: unknown size). Call [`SymTab::sort`] after the last.
    pub fn push(&mut self, start: u64, len: u64, binding: u8, name: &str) {
        let (Ok(name_at), Ok(name_len)) =
            (u32::try_from(self.names.len()), u32::try_from(name.len()))
        else {
            return; // over 4 GiB of names: not a real symbol table
        };
        self.names.push_str(name);
        self.syms.push(Sym {
            start,
            end: if len == 0 {
                start
            } else {
                start.wrapping_add(len)
            },
            binding,
            name_at,
            name_len,
        });
    }

    /// Order by start, keeping insertion order among equal starts (perf's rb-tree inserts an
    /// equal key to the right).
    pub fn sort(&mut self) {
        if !self.syms.windows(2).all(|w| w[0].start <= w[1].start) {
            self.syms.sort_by_key(|s| s.start);
        }
    }

    /// A symbol's name.
    pub fn name(&self, sym: &Sym) -> &str {
        let at = sym.name_at as usize;
        self.names
            .get(at..at + sym.name_len as usize)
            .unwrap_or_default()
    }

    /// The symbols, sorted.
    pub fn syms(&self) -> &[Sym] {
        &self.syms
    }

    /// Number of symbols.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// `symbols__fixup_end`: a zero-sized symbol ends at the next one's start; with
    /// `kallsyms`, a symbol followed by one of the other kind (module vs kernel, told by a
    /// `[` in the name) ends one page later instead; the last ends a page past its start.
    pub fn fixup_end(&mut self, kallsyms: bool) {
        let count = self.syms.len();
        for index in 1..count {
            let prev = self.syms[index - 1];
            let curr = self.syms[index];
            if prev.end != prev.start {
                continue;
            }
            let kinds_differ = self.name(&prev).contains('[') != self.name(&curr).contains('[');
            self.syms[index - 1].end = if kallsyms && kinds_differ {
                roundup_page(prev.end.wrapping_add(4096))
            } else {
                curr.start
            };
        }
        if let Some(last) = self.syms.last_mut() {
            if last.end == last.start {
                last.end = roundup_page(last.start).wrapping_add(4096);
            }
        }
    }

    /// `symbols__fixup_duplicate`: keep one symbol per start address, the one
    /// `choose_best_symbol` prefers.
    pub fn dedup(&mut self) {
        let mut out: Vec<Sym> = Vec::with_capacity(self.syms.len());
        for sym in std::mem::take(&mut self.syms) {
            match out.last_mut() {
                Some(kept) if kept.start == sym.start => {
                    if !self.first_is_better(kept, &sym) {
                        *kept = sym;
                    }
                }
                _ => out.push(sym),
            }
        }
        self.syms = out;
    }

    /// `choose_best_symbol(a, b) == SYMBOL_A`.
    fn first_is_better(&self, first: &Sym, second: &Sym) -> bool {
        let la = first.end.wrapping_sub(first.start);
        let lb = second.end.wrapping_sub(second.start);
        // perf compares these as s64.
        let la = la as i64;
        let lb = lb as i64;
        if lb == 0 && la > 0 {
            return true;
        }
        if la == 0 && lb > 0 {
            return false;
        }
        let wa = first.binding == WEAK;
        let wb = second.binding == WEAK;
        if wa != wb {
            return wb;
        }
        let ga = first.binding == GLOBAL;
        let gb = second.binding == GLOBAL;
        if ga != gb {
            return ga;
        }
        let under = |s: &Sym| self.name(s).bytes().take_while(|&c| c == b'_').count();
        let ua = under(first);
        let ub = under(second);
        if ua != ub {
            return ub > ua;
        }
        // Longest name, then the first (arch__choose_best_symbol's default).
        self.name(first).len() >= self.name(second).len()
    }

    /// Shift every symbol by `-delta` (a kernel relocated at boot).
    pub fn shift_down(&mut self, delta: u64) {
        for sym in &mut self.syms {
            sym.start = sym.start.wrapping_sub(delta);
            sym.end = sym.end.wrapping_sub(delta);
        }
    }

    /// `symbols__find`: the symbol whose `[start, end)` holds `addr` (a zero-sized symbol
    /// holds only its start). perf searches an rb-tree, so among overlapping symbols the one
    /// it meets first wins; here the nearest preceding start that holds `addr` wins.
    pub fn find(&self, addr: u64) -> Option<&Sym> {
        let after = self.syms.partition_point(|sym| sym.start <= addr);
        let holds = |sym: &Sym| addr < sym.end || (addr == sym.start && sym.start == sym.end);
        self.syms[..after]
            .iter()
            .rev()
            .take(8)
            .find(|sym| holds(sym))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(u64, u64, u8, &str)]) -> SymTab {
        let mut t = SymTab::default();
        for &(start, len, b, name) in entries {
            t.push(start, len, b, name);
        }
        t.sort();
        t
    }

    #[test]
    fn fixup_end_fills_gaps_like_perf() {
        let mut t = table(&[
            (0x1000, 0, GLOBAL, "a"),
            (0x1010, 0, GLOBAL, "b"),
            (0x1100, 0x8, GLOBAL, "c"),
        ]);
        t.fixup_end(false);
        let ends: Vec<u64> = t.syms().iter().map(|s| s.end).collect();
        assert_eq!(ends, [0x1010, 0x1100, 0x1108], "c keeps its size");
        let mut last = table(&[(0x1234, 0, GLOBAL, "x")]);
        last.fixup_end(false);
        assert_eq!(last.syms()[0].end, 0x3000, "roundup(0x1234, 4096) + 4096");
    }

    #[test]
    fn kallsyms_kernel_symbol_before_a_module_symbol_ends_a_page_on() {
        let mut t = table(&[
            (0xffff_ffff_8100_0000, 0, GLOBAL, "_text"),
            (0xffff_ffff_8100_0010, 0, GLOBAL, "last_kernel"),
            (0xffff_ffff_c000_0000, 0, LOCAL, "bpf_prog_x\t[bpf]"),
        ]);
        t.fixup_end(true);
        assert_eq!(t.syms()[1].end, 0xffff_ffff_8100_2000);
        assert_eq!(t.syms()[0].end, 0xffff_ffff_8100_0010);
    }

    /// Symbols as (start, len, binding, name).
    type Entries<'a> = &'a [(u64, u64, u8, &'a str)];

    #[test]
    fn duplicates_resolved_by_choose_best_symbol_table() {
        // (first, second, expected survivor): lengths via a following symbol at 0x200
        let cases: [(Entries<'_>, &str); 6] = [
            (
                &[(0x100, 0x10, GLOBAL, "sized"), (0x100, 0, GLOBAL, "zero")],
                "sized",
            ),
            (
                &[(0x100, 8, WEAK, "weak"), (0x100, 8, LOCAL, "local")],
                "local",
            ),
            (
                &[(0x100, 8, LOCAL, "local"), (0x100, 8, GLOBAL, "global")],
                "global",
            ),
            (
                &[(0x100, 8, GLOBAL, "__two"), (0x100, 8, GLOBAL, "_one")],
                "_one",
            ),
            (
                &[(0x100, 8, GLOBAL, "short"), (0x100, 8, GLOBAL, "longer")],
                "longer",
            ),
            (
                &[(0x100, 8, GLOBAL, "same1"), (0x100, 8, GLOBAL, "same2")],
                "same1",
            ),
        ];
        for (entries, want) in cases {
            let mut t = table(entries);
            t.fixup_end(false);
            t.dedup();
            assert_eq!(t.len(), 1);
            assert_eq!(t.name(&t.syms()[0]), want, "{entries:?}");
        }
    }

    #[test]
    fn kallsyms_duplicates_keep_the_last_listed() {
        // All kallsyms symbols are zero-sized before fixup_end: only the last of a group gets
        // a size, so it wins on "non-zero length" (what perf prints for _stext/_text).
        let mut t = table(&[
            (0x1000, 0, GLOBAL, "srso_alias_untrain_ret"),
            (0x1000, 0, GLOBAL, "_stext"),
            (0x1000, 0, GLOBAL, "_text"),
            (0x1010, 0, GLOBAL, "next"),
        ]);
        t.fixup_end(true);
        t.dedup();
        assert_eq!(t.name(&t.syms()[0]), "_text");
    }

    #[test]
    fn find_follows_symbols_find_bounds() {
        let mut t = table(&[(0x100, 0x10, GLOBAL, "a"), (0x200, 0, GLOBAL, "z")]);
        t.dedup();
        let name = |addr| t.find(addr).map(|s| t.name(s).to_string());
        assert_eq!(name(0x100).as_deref(), Some("a"));
        assert_eq!(name(0x10f).as_deref(), Some("a"));
        assert_eq!(name(0x110), None, "end is exclusive");
        assert_eq!(
            name(0x200).as_deref(),
            Some("z"),
            "zero size holds its start"
        );
        assert_eq!(name(0x201), None);
        assert_eq!(name(0x50), None);
        assert_eq!(name(u64::MAX), None);
    }
}

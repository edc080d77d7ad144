//! The running kernel's build id, read from `/sys/kernel/notes`: the ELF notes of the kernel
//! image, among them the GNU build-id note that perf records as `[kernel.kallsyms]`'s build id
//! (`perf buildid-list -k` prints the same). A profile's kernel symbols are taken from this
//! machine's /proc/kallsyms only when the two ids agree.

use super::Host;

/// The note type of a GNU build id (`NT_GNU_BUILD_ID` in `elf.h`).
const NT_GNU_BUILD_ID: u32 = 3;

/// The owner name of GNU notes, with its terminating NUL.
const GNU_OWNER: &[u8] = b"GNU\0";

/// The running kernel's build id, when the host shows its notes.
pub fn running_build_id(host: &Host) -> Option<Vec<u8>> {
    let notes = std::fs::read(host.path("sys/kernel/notes")).ok()?;
    gnu_build_id(&notes)
}

/// Lower-case hex, as the kernel and perf print build ids and BPF program tags.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The GNU build id among ELF notes in the host's byte order: each note is a name size, a
/// descriptor size and a type (32 bits each), then the name and the descriptor, each padded
/// to 4 bytes.
pub(crate) fn gnu_build_id(notes: &[u8]) -> Option<Vec<u8>> {
    let mut rest = notes;
    while rest.len() >= 12 {
        let word =
            |at: usize| u32::from_ne_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]);
        let name_len = usize::try_from(word(0)).ok()?;
        let desc_len = usize::try_from(word(4)).ok()?;
        let kind = word(8);
        let name_end = 12usize.checked_add(name_len.next_multiple_of(4))?;
        let desc_end = name_end.checked_add(desc_len.next_multiple_of(4))?;
        let name = rest.get(12..12 + name_len)?;
        let desc = rest.get(name_end..name_end + desc_len)?;
        if kind == NT_GNU_BUILD_ID && name == GNU_OWNER && !desc.is_empty() {
            return Some(desc.to_vec());
        }
        rest = rest.get(desc_end..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(name.len() as u32).to_ne_bytes());
        out.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(name);
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend_from_slice(desc);
        out.resize(out.len().next_multiple_of(4), 0);
        out
    }

    #[test]
    fn the_gnu_build_id_is_found_among_other_notes() {
        let mut notes = note(b"Xen\0", 18, &[1, 2, 3]);
        notes.extend(note(b"Linux\0", 0x101, &[0; 4]));
        notes.extend(note(GNU_OWNER, NT_GNU_BUILD_ID, &[0xab; 20]));
        assert_eq!(gnu_build_id(&notes), Some(vec![0xab; 20]));
    }

    #[test]
    fn notes_without_a_build_id_or_cut_short_give_none() {
        assert_eq!(gnu_build_id(&note(b"Linux\0", 1, &[9; 8])), None);
        let whole = note(GNU_OWNER, NT_GNU_BUILD_ID, &[0xab; 20]);
        assert_eq!(gnu_build_id(&whole[..whole.len() - 4]), None);
        assert_eq!(gnu_build_id(&[]), None);
        // A type-3 note of another owner is not a GNU build id.
        assert_eq!(
            gnu_build_id(&note(b"Go\0\0", NT_GNU_BUILD_ID, &[1; 20])),
            None
        );
    }

    #[test]
    fn a_host_tree_gives_its_notes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/kernel")).unwrap();
        let host = Host::at(dir.path());
        assert_eq!(running_build_id(&host), None);
        std::fs::write(
            dir.path().join("sys/kernel/notes"),
            note(GNU_OWNER, NT_GNU_BUILD_ID, &[7; 20]),
        )
        .unwrap();
        assert_eq!(running_build_id(&host), Some(vec![7; 20]));
    }
}

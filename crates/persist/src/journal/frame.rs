//! The journal's on-disk framing: a versioned file header, then frames,
//! each a checksummed unit of records (one command's, or one
//! transaction's) that replays entirely or not at all.
//!
//! ```text
//! file   := header frame*
//! header := "CAIRNJNL" (8 bytes)  version:u16 LE (= 1)  flags:u16 LE (= 0)  reserved:u32 (= 0)
//! frame  := len:u32 LE  crc:u32 LE  payload[len]
//!           crc = CRC-32C (crate::crc) over the 4 length bytes then the payload
//!           payload = records (cairn_engine::record: tag db argc (len bytes)*)
//! ```
//!
//! Reading: a frame that is bad and is the last thing in the file (it runs
//! past the end, or its bytes are all there but its checksum fails, or the
//! file ends inside a frame header) is a torn tail: a crash while the frame
//! was being written. It is dropped (with a warning) when
//! `aof-load-truncated` allows. A bad frame followed by more bytes is
//! corruption and stops start-up with the file, offset and reason.
use crate::crc::crc32c;
use crate::{Error, ErrorKind};
use cairn_engine::record;
use std::io::Read;
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 8] = b"CAIRNJNL";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: u64 = 16;
pub const FRAME_HEADER_LEN: usize = 8;
/// The largest payload a frame may declare (1 GiB + slack for the record
/// encoding, above `client-query-buffer-limit`'s default): a bigger length
/// can only be garbage, and reading it would allocate without bound.
pub const MAX_FRAME: u32 = (1 << 30) + (1 << 20);

/// The 16-byte file header.
pub fn header() -> [u8; 16] {
    let mut h = [0u8; 16];
    h[..8].copy_from_slice(MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// The frame header for `payload`.
pub fn frame_header(payload: &[u8]) -> [u8; 8] {
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32c(crc32c(0, &len), payload);
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&len);
    h[4..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Fills in the headers of the frames starting at `starts` in `data` (in
/// order, each running to the next, the last to the end of `data`), whose
/// header bytes were reserved when each frame was opened. The journal
/// checksums a batch of units at once, when it is taken for writing,
/// rather than each unit as it is appended (the server's
/// `journal::Journal::append_with`).
///
/// The length is first stored where the checksum goes, right before the
/// payload, so that one pass covers the length and the payload together
/// (as `frame_header`'s two calls do): a call of the CRC costs about
/// 120 instructions before its first byte (callgrind), and this runs once
/// per frame on the journal's write path.
pub fn seal(data: &mut [u8], starts: &[usize]) {
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(data.len());
        let len = ((end - start - FRAME_HEADER_LEN) as u32).to_le_bytes();
        data[start + 4..start + 8].copy_from_slice(&len);
        let crc = crc32c(0, &data[start + 4..end]);
        data[start..start + 4].copy_from_slice(&len);
        data[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Appends one frame to `out` (tests build files with it).
#[cfg(test)]
pub fn put_frame(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&frame_header(payload));
    out.extend_from_slice(payload);
}

/// How reading a journal file ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// Every byte belonged to a good frame.
    Clean,
    /// The last frame is incomplete or bad: a crash while writing it.
    /// The file is good up to `good_end`.
    Torn { good_end: u64, reason: String },
    /// A bad frame with more data after it, or a bad header: not a crash
    /// artefact. Start-up stops.
    Corrupt { offset: u64, reason: String },
}

/// What a read found.
#[derive(Debug)]
pub struct Summary {
    pub frames: u64,
    pub records: u64,
    /// End of the last good frame.
    pub good_end: u64,
    pub end: End,
}

impl Summary {
    fn new() -> Summary {
        Summary {
            frames: 0,
            records: 0,
            good_end: 0,
            end: End::Clean,
        }
    }

    /// How the end of the file at `path` stops a load that takes no torn
    /// tail: None for a clean end, else the file, offset and reason.
    pub fn error(&self, path: &Path) -> Option<Error> {
        let (offset, kind) = match &self.end {
            End::Clean => return None,
            End::Torn { good_end, reason } => (*good_end, ErrorKind::Torn(reason.clone())),
            End::Corrupt { offset, reason } => (*offset, ErrorKind::Corrupt(reason.clone())),
        };
        Some(Error {
            path: path.to_path_buf(),
            offset: Some(offset),
            kind,
        })
    }
}

/// Reads a journal of `len` bytes from `r`, calling `on_frame(offset,
/// records)` for each good frame in order. An error from `on_frame` stops
/// the read as corruption at that frame (a frame whose checksum is right
/// but whose records do not decode is reported the same way).
pub fn read<R: Read>(
    r: R,
    len: u64,
    on_frame: impl FnMut(u64, &[record::Record<'_>]) -> Result<(), String>,
) -> std::io::Result<Summary> {
    let mut s = Summary::new();
    read_into(r, len, on_frame, &mut s)?;
    Ok(s)
}

/// A journal file opened for reading (replay, `cairn check-journal`).
pub struct Reader {
    path: PathBuf,
    file: std::fs::File,
    len: u64,
}

impl Reader {
    pub fn open(path: &Path) -> Result<Reader, Error> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, "open", e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(path, "stat", e))?
            .len();
        Ok(Reader {
            path: path.to_path_buf(),
            file,
            len,
        })
    }

    /// The file's length when it was opened.
    pub fn len_bytes(&self) -> u64 {
        self.len
    }

    /// `read` over the whole file; a failed read names the offset of the
    /// frame it was in.
    pub fn read(
        self,
        on_frame: impl FnMut(u64, &[record::Record<'_>]) -> Result<(), String>,
    ) -> Result<Summary, Error> {
        let mut s = Summary::new();
        let r = std::io::BufReader::with_capacity(1 << 20, self.file);
        read_into(r, self.len, on_frame, &mut s)
            .map_err(|e| Error::io(&self.path, "read", e).at(s.good_end))?;
        Ok(s)
    }
}

fn read_into<R: Read>(
    mut r: R,
    len: u64,
    mut on_frame: impl FnMut(u64, &[record::Record<'_>]) -> Result<(), String>,
    s: &mut Summary,
) -> std::io::Result<()> {
    let mut h = [0u8; 16];
    if len < HEADER_LEN {
        read_up_to(&mut r, &mut h[..len as usize])?;
        // A file cut inside its own header holds no frame yet: a crash
        // right after creating it. Anything else short is not ours.
        s.end = if h[..len as usize] == header()[..len as usize] {
            End::Torn {
                good_end: 0,
                reason: "the file ends inside its header".into(),
            }
        } else {
            End::Corrupt {
                offset: 0,
                reason: "not a Cairn journal (bad header)".into(),
            }
        };
        return Ok(());
    }
    r.read_exact(&mut h)?;
    if &h[..8] != MAGIC {
        s.end = End::Corrupt {
            offset: 0,
            reason: "not a Cairn journal (bad magic)".into(),
        };
        return Ok(());
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != VERSION {
        s.end = End::Corrupt {
            offset: 8,
            reason: format!("unsupported journal version {version} (this build reads {VERSION})"),
        };
        return Ok(());
    }
    let mut pos = HEADER_LEN;
    s.good_end = pos;
    let mut payload = Vec::new();
    while pos < len {
        let left = len - pos;
        let torn = |reason: String| End::Torn {
            good_end: pos,
            reason,
        };
        if left < FRAME_HEADER_LEN as u64 {
            s.end = torn(format!(
                "the file ends inside a frame header ({left} bytes)"
            ));
            return Ok(());
        }
        let mut fh = [0u8; 8];
        r.read_exact(&mut fh)?;
        let flen = u32::from_le_bytes([fh[0], fh[1], fh[2], fh[3]]);
        let crc = u32::from_le_bytes([fh[4], fh[5], fh[6], fh[7]]);
        let body_left = left - FRAME_HEADER_LEN as u64;
        if flen == 0 || flen > MAX_FRAME {
            let reason = format!("impossible frame length {flen}");
            // Zeros at the very end: a file extended but not yet written.
            s.end = if fh.iter().all(|&b| b == 0) && all_zero(&mut r, body_left)? {
                torn(reason)
            } else {
                End::Corrupt {
                    offset: pos,
                    reason,
                }
            };
            return Ok(());
        }
        if u64::from(flen) > body_left {
            s.end = torn(format!(
                "the last frame needs {flen} bytes, the file has {body_left}"
            ));
            return Ok(());
        }
        payload.resize(flen as usize, 0);
        r.read_exact(&mut payload)?;
        let last = u64::from(flen) == body_left;
        if crc32c(crc32c(0, &fh[..4]), &payload) != crc {
            let reason = "checksum mismatch".to_string();
            s.end = if last {
                torn(reason)
            } else {
                End::Corrupt {
                    offset: pos,
                    reason,
                }
            };
            return Ok(());
        }
        let recs = match record::decode_unit(&payload) {
            Ok(r) => r,
            Err((at, why)) => {
                s.end = End::Corrupt {
                    offset: pos + FRAME_HEADER_LEN as u64 + at as u64,
                    reason: format!("bad record in a frame with a good checksum: {why}"),
                };
                return Ok(());
            }
        };
        if let Err(why) = on_frame(pos, &recs) {
            s.end = End::Corrupt {
                offset: pos,
                reason: why,
            };
            return Ok(());
        }
        s.frames += 1;
        s.records += recs.len() as u64;
        pos += FRAME_HEADER_LEN as u64 + u64::from(flen);
        s.good_end = pos;
    }
    Ok(())
}

fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<()> {
    r.read_exact(buf)
}

/// True if the next `n` bytes are all zero.
fn all_zero<R: Read>(r: &mut R, mut n: u64) -> std::io::Result<bool> {
    let mut buf = [0u8; 8192];
    while n > 0 {
        let k = n.min(buf.len() as u64) as usize;
        r.read_exact(&mut buf[..k])?;
        if buf[..k].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        n -= k as u64;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_engine::record::{encode, Tag};

    #[test]
    fn header_is_pinned() {
        assert_eq!(
            header(),
            [b'C', b'A', b'I', b'R', b'N', b'J', b'N', b'L', 1, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn frame_bytes_are_pinned() {
        let mut p = Vec::new();
        encode(&mut p, Tag::Command, 0, [&b"DEL"[..], b"k"].into_iter());
        assert_eq!(p, [1, 0, 2, 3, b'D', b'E', b'L', 1, b'k']);
        let mut f = Vec::new();
        put_frame(&mut f, &p);
        assert_eq!(&f[..4], &[9, 0, 0, 0]);
        let crc = crc32c(crc32c(0, &[9, 0, 0, 0]), &p);
        assert_eq!(&f[4..8], &crc.to_le_bytes());
        // The checksum's own bytes, so that a change of CRC cannot pass
        // unnoticed: files written before must still read.
        assert_eq!(crc, 0x4fa2_c6c0);
    }

    /// Frames sealed in place equal frames built one by one.
    #[test]
    fn sealing_reserved_headers_builds_the_same_frames() {
        let units: Vec<Vec<u8>> = (0..5).map(unit).collect();
        let mut expect = Vec::new();
        put_frame(&mut expect, &[units[0].clone(), units[1].clone()].concat());
        put_frame(&mut expect, &units[2]);
        put_frame(&mut expect, &[units[3].clone(), units[4].clone()].concat());
        let mut data = Vec::new();
        let mut starts = Vec::new();
        for (i, u) in units.iter().enumerate() {
            if i != 1 && i != 4 {
                starts.push(data.len());
                data.extend_from_slice(&[0xAA; FRAME_HEADER_LEN]);
            }
            data.extend_from_slice(u);
        }
        seal(&mut data, &starts);
        assert_eq!(data, expect);
        let mut f = header().to_vec();
        f.extend_from_slice(&data);
        let (summary, offsets) = scan(&f);
        assert!(matches!(summary.end, End::Clean), "{:?}", summary.end);
        assert_eq!(offsets.len(), 3);
    }

    fn file(units: &[Vec<u8>]) -> Vec<u8> {
        let mut f = header().to_vec();
        for u in units {
            put_frame(&mut f, u);
        }
        f
    }

    fn unit(i: usize) -> Vec<u8> {
        let mut p = Vec::new();
        let k = format!("key{i}");
        encode(
            &mut p,
            Tag::Command,
            i % 3,
            [&b"SET"[..], k.as_bytes(), b"v"].into_iter(),
        );
        p
    }

    fn scan(f: &[u8]) -> (Summary, Vec<u64>) {
        let mut offs = Vec::new();
        let s = read(f, f.len() as u64, |o, _| {
            offs.push(o);
            Ok(())
        })
        .unwrap();
        (s, offs)
    }

    #[test]
    fn clean_file_reads_every_frame() {
        let f = file(&(0..5).map(unit).collect::<Vec<_>>());
        let (s, offs) = scan(&f);
        assert_eq!(s.end, End::Clean);
        assert_eq!(s.frames, 5);
        assert_eq!(s.records, 5);
        assert_eq!(offs.len(), 5);
        assert_eq!(offs[0], HEADER_LEN);
        assert_eq!(s.good_end, f.len() as u64);
    }

    #[test]
    fn every_cut_is_a_torn_tail_holding_a_prefix() {
        let units: Vec<Vec<u8>> = (0..6).map(unit).collect();
        let f = file(&units);
        // Frame boundaries.
        let mut ends = vec![HEADER_LEN];
        for u in &units {
            ends.push(ends.last().unwrap() + 8 + u.len() as u64);
        }
        for cut in 0..=f.len() {
            let (s, offs) = scan(&f[..cut]);
            let whole = ends.iter().filter(|&&e| e <= cut as u64).count();
            let expect_frames = whole.saturating_sub(1) as u64;
            assert_eq!(s.frames, expect_frames, "cut {cut}");
            assert_eq!(offs.len() as u64, expect_frames);
            if ends.contains(&(cut as u64)) {
                assert_eq!(s.end, End::Clean, "cut {cut}");
            } else {
                assert!(matches!(s.end, End::Torn { .. }), "cut {cut}: {:?}", s.end);
            }
        }
    }

    #[test]
    fn a_flipped_byte_is_found_at_its_frame() {
        let units: Vec<Vec<u8>> = (0..6).map(unit).collect();
        let f = file(&units);
        let third = HEADER_LEN + units[..2].iter().map(|u| 8 + u.len() as u64).sum::<u64>();
        let third_end = third + 8 + units[2].len() as u64;
        for at in third..third_end {
            for bit in [0x01u8, 0x80] {
                let mut g = f.clone();
                g[at as usize] ^= bit;
                let (s, _) = scan(&g);
                assert_eq!(s.frames, 2, "flip at {at}");
                match s.end {
                    End::Corrupt { offset, .. } => assert_eq!(offset, third, "flip at {at}"),
                    // A flipped length can make the frame run past the end.
                    End::Torn { good_end, .. } => {
                        assert!(at < third + 4, "flip at {at} read as torn");
                        assert_eq!(good_end, third);
                    }
                    End::Clean => panic!("flip at {at} not detected"),
                }
            }
        }
        // In the last frame a flip is indistinguishable from a torn write.
        let mut g = f.clone();
        let n = g.len();
        g[n - 1] ^= 1;
        assert!(matches!(scan(&g).0.end, End::Torn { .. }));
    }

    #[test]
    fn bad_headers_are_corrupt() {
        let mut f = file(&[unit(1)]);
        f[0] = b'X';
        assert!(matches!(scan(&f).0.end, End::Corrupt { offset: 0, .. }));
        let mut f = file(&[unit(1)]);
        f[8] = 9;
        assert!(matches!(scan(&f).0.end, End::Corrupt { offset: 8, .. }));
        assert!(matches!(
            scan(b"hello").0.end,
            End::Corrupt { offset: 0, .. }
        ));
    }

    #[test]
    fn trailing_zeros_are_torn_but_zeros_in_the_middle_are_not() {
        let mut f = file(&[unit(1)]);
        f.extend_from_slice(&[0u8; 100]);
        assert!(matches!(scan(&f).0.end, End::Torn { .. }));
        let mut f = file(&[unit(1)]);
        f.extend_from_slice(&[0u8; 8]);
        f.extend_from_slice(&file(&[unit(2)])[16..]);
        assert!(matches!(scan(&f).0.end, End::Corrupt { .. }));
    }
}

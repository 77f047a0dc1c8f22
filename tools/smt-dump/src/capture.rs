//! Capture files: pcap (both byte orders, micro- or nanosecond stamps)
//! and pcapng (any number of sections and interfaces), read with
//! `pcap-parser`. What comes out is a list of link-layer frames with their
//! link type and time; [`crate::link`] takes them apart.

use std::fmt;

use pcap_parser::pcapng::Block;
use pcap_parser::{Linktype, PcapBlockOwned, PcapError, PcapNGSlice};

/// One captured frame, as the capture file holds it.
#[derive(Clone, Debug)]
pub struct Frame<'a> {
    /// 1-based, as Wireshark numbers frames.
    pub number: u64,
    /// Seconds since the Unix epoch.
    pub time: f64,
    /// The link type of the interface that captured it.
    pub linktype: Linktype,
    /// The captured bytes (possibly fewer than were on the wire).
    pub data: &'a [u8],
    /// Bytes the frame had on the wire.
    pub orig_len: u32,
}

/// The frames of a capture file, and why reading stopped early, if it did
/// (the frames before that point are kept).
#[derive(Debug)]
pub struct Capture<'a> {
    /// Which container the file was (pcap or pcapng).
    pub format: Format,
    /// The frames read, in file order.
    pub frames: Vec<Frame<'a>>,
    /// Why reading stopped before the end of the file, if it did.
    pub truncated: Option<CaptureError>,
    /// Packets the capturing program says it dropped (pcapng interface
    /// statistics, `isb_ifdrop`, summed over interfaces); `None` when the
    /// file does not say.
    pub dropped: Option<u64>,
}

/// Which container the file was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The classic libpcap format (microsecond or nanosecond stamps, either byte order).
    Pcap,
    /// pcapng (section, interface description, enhanced and simple packet blocks).
    PcapNg,
}

/// The capture file itself is unreadable (its contents are the writer's
/// fault, or the file was cut short).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CaptureError {
    /// Neither a pcap nor a pcapng header at the start.
    NotACapture,
    /// The file ends inside frame `frame` (the byte offset where it starts).
    Truncated {
        /// The frame's number (1-based).
        frame: u64,
        /// Where the frame starts in the file.
        offset: usize,
    },
    /// A block or record that cannot be parsed, at this byte offset.
    Malformed {
        /// The frame's number (1-based).
        frame: u64,
        /// Where the block or record starts in the file.
        offset: usize,
    },
    /// A pcapng packet names an interface no description block declared.
    UnknownInterface {
        /// The frame's number (1-based).
        frame: u64,
        /// The interface ID the packet block names.
        interface: u32,
    },
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotACapture => f.write_str(
                "not a pcap or pcapng file (no capture-file header at the start; \
                 tcpdump -w and Wireshark write either)",
            ),
            Self::Truncated { frame, offset } => write!(
                f,
                "the capture file ends inside frame {frame} (at byte {offset}); \
                 the frames before it were read"
            ),
            Self::Malformed { frame, offset } => write!(
                f,
                "the capture file is corrupt at byte {offset} (frame {frame}); \
                 the frames before it were read"
            ),
            Self::UnknownInterface { frame, interface } => write!(
                f,
                "frame {frame} names interface {interface}, which the pcapng file never declared"
            ),
        }
    }
}

impl std::error::Error for CaptureError {}

/// Reads every frame of a pcap or pcapng file held in memory. Fails only
/// when the file is neither; a file that goes bad later yields the frames
/// before that point and says why in [`Capture::truncated`].
pub fn read(bytes: &[u8]) -> Result<Capture<'_>, CaptureError> {
    if let Ok(slice) = PcapNGSlice::from_slice(bytes) {
        return Ok(read_pcapng(bytes.len(), slice));
    }
    match pcap_parser::pcap::parse_pcap_header(bytes) {
        Ok((rest, header)) => Ok(read_pcap(bytes.len(), rest, &header)),
        Err(_) => Err(CaptureError::NotACapture),
    }
}

fn read_pcap<'a>(
    total: usize,
    mut rest: &'a [u8],
    header: &pcap_parser::PcapHeader,
) -> Capture<'a> {
    let parse = match (header.is_modified_format(), header.is_bigendian()) {
        (true, _) => pcap_parser::pcap::parse_pcap_frame_modified,
        (false, true) => pcap_parser::pcap::parse_pcap_frame_be,
        (false, false) => pcap_parser::pcap::parse_pcap_frame,
    };
    let fraction = if header.is_nanosecond_precision() {
        1e-9
    } else {
        1e-6
    };
    let mut capture = Capture {
        format: Format::Pcap,
        frames: Vec::new(),
        truncated: None,
        dropped: None,
    };
    while !rest.is_empty() {
        let number = capture.frames.len() as u64 + 1;
        let offset = total - rest.len();
        match parse(rest) {
            Ok((after, block)) => {
                capture.frames.push(Frame {
                    number,
                    time: f64::from(block.ts_sec) + f64::from(block.ts_usec) * fraction,
                    linktype: header.network,
                    data: block.data,
                    orig_len: block.origlen,
                });
                rest = after;
            }
            Err(e) => {
                capture.truncated = Some(stop_reason(&e, number, offset));
                break;
            }
        }
    }
    capture
}

/// One pcapng interface: its link type and how its timestamps count.
struct Interface {
    linktype: Linktype,
    units_per_second: u64,
    offset: i64,
}

fn read_pcapng<'a>(total: usize, slice: PcapNGSlice<'a>) -> Capture<'a> {
    let mut capture = Capture {
        format: Format::PcapNg,
        frames: Vec::new(),
        truncated: None,
        dropped: None,
    };
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut offset = 0;
    for block in slice {
        let number = capture.frames.len() as u64 + 1;
        let block = match block {
            Ok(PcapBlockOwned::NG(b)) => b,
            Ok(_) => continue,
            Err(e) => {
                capture.truncated = Some(stop_reason(&e, number, offset));
                break;
            }
        };
        offset += block_len(&block);
        match block {
            Block::SectionHeader(_) => interfaces.clear(),
            Block::InterfaceDescription(idb) => interfaces.push(Interface {
                linktype: idb.linktype,
                units_per_second: idb.ts_resolution().unwrap_or(1_000_000).max(1),
                offset: idb.ts_offset(),
            }),
            Block::EnhancedPacket(epb) => {
                let Some(iface) = interfaces.get(epb.if_id as usize) else {
                    capture.truncated = Some(CaptureError::UnknownInterface {
                        frame: number,
                        interface: epb.if_id,
                    });
                    break;
                };
                let ticks = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                let time = iface.offset as f64 + ticks as f64 / iface.units_per_second as f64;
                let caplen = (epb.caplen as usize).min(epb.data.len());
                capture.frames.push(Frame {
                    number,
                    time,
                    linktype: iface.linktype,
                    data: &epb.data[..caplen],
                    orig_len: epb.origlen,
                });
            }
            Block::InterfaceStatistics(isb) => {
                if let Some(Ok(n)) = isb.isb_ifdrop() {
                    *capture.dropped.get_or_insert(0) += n;
                }
            }
            Block::SimplePacket(spb) => {
                let Some(iface) = interfaces.first() else {
                    capture.truncated = Some(CaptureError::UnknownInterface {
                        frame: number,
                        interface: 0,
                    });
                    break;
                };
                let caplen = (spb.origlen as usize).min(spb.data.len());
                capture.frames.push(Frame {
                    number,
                    time: 0.0,
                    linktype: iface.linktype,
                    data: &spb.data[..caplen],
                    orig_len: spb.origlen,
                });
            }
            _ => {}
        }
    }
    let _ = total;
    capture
}

fn block_len(block: &Block<'_>) -> usize {
    let len = match block {
        Block::SectionHeader(b) => b.block_len1,
        Block::InterfaceDescription(b) => b.block_len1,
        Block::EnhancedPacket(b) => b.block_len1,
        Block::SimplePacket(b) => b.block_len1,
        Block::NameResolution(b) => b.block_len1,
        Block::InterfaceStatistics(b) => b.block_len1,
        Block::SystemdJournalExport(b) => b.block_len1,
        Block::DecryptionSecrets(b) => b.block_len1,
        Block::ProcessInformation(b) => b.block_len1,
        Block::Custom(b) => b.block_len1,
        Block::Unknown(b) => b.block_len1,
    };
    len as usize
}

fn stop_reason<I>(e: &nom_err::Err<PcapError<I>>, frame: u64, offset: usize) -> CaptureError {
    match e {
        nom_err::Err::Incomplete(_) => CaptureError::Truncated { frame, offset },
        nom_err::Err::Error(PcapError::Incomplete(_) | PcapError::UnexpectedEof)
        | nom_err::Err::Failure(PcapError::Incomplete(_) | PcapError::UnexpectedEof) => {
            CaptureError::Truncated { frame, offset }
        }
        _ => CaptureError::Malformed { frame, offset },
    }
}

/// nom's error wrapper, reached through pcap-parser's re-export so this
/// crate needs no nom dependency of its own.
mod nom_err {
    pub(super) use pcap_parser::nom::Err;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pcap file by hand: `magic` and the record header in either byte
    /// order, as other writers make them.
    fn pcap_file(big_endian: bool, nanos: bool) -> Vec<u8> {
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let words32 = |v: u32| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let words16 = |v: u16| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut out = Vec::new();
        out.extend(words32(magic));
        out.extend(words16(2));
        out.extend(words16(4));
        out.extend(words32(0));
        out.extend(words32(0));
        out.extend(words32(65535));
        out.extend(words32(101)); // LINKTYPE_RAW
        for (sec, frac) in [(10, 500), (11, 0)] {
            out.extend(words32(sec));
            out.extend(words32(frac));
            out.extend(words32(3));
            out.extend(words32(3));
            out.extend([0x45, 0, 0]);
        }
        out
    }

    #[test]
    fn reads_pcap_in_both_byte_orders_and_precisions() {
        for big_endian in [false, true] {
            for nanos in [false, true] {
                let file = pcap_file(big_endian, nanos);
                let cap = read(&file).unwrap();
                assert_eq!(cap.format, Format::Pcap);
                assert!(cap.truncated.is_none());
                assert_eq!(cap.frames.len(), 2);
                assert_eq!(cap.frames[0].linktype, Linktype::RAW);
                assert_eq!(cap.frames[1].data, [0x45, 0, 0]);
                let frac = if nanos { 500e-9 } else { 500e-6 };
                assert!((cap.frames[0].time - (10.0 + frac)).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn garbage_is_not_a_capture() {
        for bytes in [&b""[..], b"hello", &[0xd4, 0xc3, 0xb2], &[0; 100]] {
            assert_eq!(read(bytes).unwrap_err(), CaptureError::NotACapture);
        }
    }
}

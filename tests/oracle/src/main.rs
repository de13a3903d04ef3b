// Behavioural stand-in for safetensors' read_metadata: the same serde types
// and the same validation order, to compare verdicts with ringload.
use serde::Deserialize;
use std::collections::HashMap;

#[derive(Debug, Deserialize, Clone, Copy)]
#[allow(non_camel_case_types)]
enum Dtype { BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ,
    I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64 }
impl Dtype {
    fn bits(&self) -> usize {
        use Dtype::*;
        match self { F4 => 4, F6_E2M3 | F6_E3M2 => 6, BOOL | U8 | I8 | F8_E5M2 | F8_E4M3 | F8_E8M0 | F8_E4M3FNUZ | F8_E5M2FNUZ => 8,
            I16 | U16 | F16 | BF16 => 16, I32 | U32 | F32 => 32, C64 | F64 | I64 | U64 => 64 }
    }
}
#[derive(Debug, Deserialize)]
struct TensorInfo { dtype: Dtype, shape: Vec<usize>, data_offsets: (usize, usize) }
#[derive(Deserialize)]
struct HashMetadata {
    #[serde(rename = "__metadata__")]
    metadata: Option<HashMap<String, String>>,
    #[serde(flatten)]
    tensors: HashMap<String, TensorInfo>,
}

fn verdict(buf: &[u8]) -> String {
    if buf.len() < 8 { return "err HeaderTooSmall".into(); }
    let n = u64::from_le_bytes(buf[..8].try_into().unwrap()) as usize;
    if n > 100_000_000 { return "err HeaderTooLarge".into(); }
    let stop = match n.checked_add(8) { Some(s) => s, None => return "err InvalidHeaderLength".into() };
    if stop > buf.len() { return "err InvalidHeaderLength".into(); }
    let s = match std::str::from_utf8(&buf[8..stop]) { Ok(s) => s, Err(_) => return "err InvalidHeader".into() };
    let h: HashMetadata = match serde_json::from_str(s) { Ok(h) => h, Err(e) => return format!("err InvalidHeaderDeserialization {}", e) };
    let _ = h.metadata;
    let mut t: Vec<(String, TensorInfo)> = h.tensors.into_iter().collect();
    t.sort_by(|a, b| a.1.data_offsets.cmp(&b.1.data_offsets).then(a.0.cmp(&b.0)));
    let mut start = 0usize;
    for (_, info) in &t {
        let (s, e) = info.data_offsets;
        if s != start || e < s { return "err InvalidOffset".into(); }
        start = e;
        let ne = match info.shape.iter().copied().try_fold(1usize, usize::checked_mul) { Some(v) => v, None => return "err ValidationOverflow".into() };
        let nb = match ne.checked_mul(info.dtype.bits()) { Some(v) => v, None => return "err ValidationOverflow".into() };
        if nb % 8 != 0 { return "err MisalignedSlice".into(); }
        if e - s != nb / 8 { return "err TensorInvalidInfo".into(); }
    }
    match start.checked_add(8 + n) {
        Some(v) if v == buf.len() => format!("ok {}", t.len()),
        _ => "err MetadataIncompleteBuffer".into(),
    }
}

fn main() {
    for p in std::env::args().skip(1) {
        let b = std::fs::read(&p).unwrap();
        println!("{}\t{}", p, verdict(&b));
    }
}

//! RESP2/RESP3 codec (placeholder module, filled by the codec work).

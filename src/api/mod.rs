//! The SQL surface, one module per concept. Functions users call live in schema `eventtime`;
//! helpers the generated SQL calls live in `_eventtime`.

pub mod corrections;
pub mod explain;
pub mod front;
pub mod ingest;
pub mod introspect;
pub mod landing;
pub mod offsets;
pub mod pipeline;
pub mod watermark;

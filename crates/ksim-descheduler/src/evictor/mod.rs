//! Evicting pods: the DefaultEvictor's filters, the cycle's evictor with
//! its limits and records, and the eviction API it calls.

mod api;
mod defaultevictor;
mod podevictor;

pub use api::{DESCHEDULER_NAME, EventLog, KubeEvictionApi};
pub use defaultevictor::{
    DefaultEvictor, DefaultEvictorArgs, EVICT_ANNOTATION, EvictorContext, NAME as DEFAULT_EVICTOR,
    PodProtections, PriorityThreshold,
};
pub use podevictor::{
    CycleEvictor, EvictionApi, EvictionLimits, EvictionRecord, EvictionResult, ProfileEvictor,
};

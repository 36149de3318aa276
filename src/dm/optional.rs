//! Envoy callbacks this module uses only when the Envoy it runs in has them, resolved by name once
//! (`dlsym`) instead of linked: a callback newer than an operator's Envoy then costs that feature (one
//! log line), not the whole module's load (a linked import Envoy lacks fails `dlopen`).
#![allow(unsafe_code)]

use super::abi::{ModuleBuffer, RESET_LOCAL};
use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// glibc's RTLD_DEFAULT: search the process's global symbols (Envoy's exports among them).
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();

// Envoy's metadata setters return nothing in some releases and `bool` in others: the result is not read.
type SetMetadataNumber = unsafe extern "C" fn(*mut c_void, ModuleBuffer, ModuleBuffer, f64);
type SetMetadataString = unsafe extern "C" fn(*mut c_void, ModuleBuffer, ModuleBuffer, ModuleBuffer);
/// The namespace from a serialized `google.protobuf.Struct` (Envoy 1.40; merged into what is there).
type SetMetadataStruct = unsafe extern "C" fn(*mut c_void, ModuleBuffer, ModuleBuffer);
type SetFilterState = unsafe extern "C" fn(*mut c_void, ModuleBuffer, ModuleBuffer) -> bool;
/// A counter of the configuration, from the main thread: (configuration, id, label values, their
/// number, value) → metrics result, as the stream's `increment_counter`.
type ConfigIncrement = unsafe extern "C" fn(*mut c_void, usize, *mut ModuleBuffer, usize, u64) -> u32;
/// `envoy_dynamic_module_callback_http_filter_reset_stream` (filter, reason, details).
type ResetStream = unsafe extern "C" fn(*mut c_void, u32, ModuleBuffer);

/// The optional callbacks this Envoy has.
pub struct Optional {
    pub metadata_number: Option<SetMetadataNumber>,
    pub metadata_string: Option<SetMetadataString>,
    pub metadata_struct: Option<SetMetadataStruct>,
    pub filter_state: Option<SetFilterState>,
    /// Without it each stream adds its counters itself (`dm::tally`).
    pub config_increment: Option<ConfigIncrement>,
    pub reset_stream: Option<ResetStream>,
}

pub(super) fn lookup(name: &CStr) -> *mut c_void {
    // SAFETY: a NUL-terminated name; dlsym only reads it.
    unsafe { dlsym(RTLD_DEFAULT, name.as_ptr()) }
}

/// Resolved on first use; a missing callback is logged once, naming what is not done without it.
pub fn optional() -> &'static Optional {
    static OPTIONAL: OnceLock<Optional> = OnceLock::new();
    OPTIONAL.get_or_init(|| {
        let number = lookup(c"envoy_dynamic_module_callback_http_set_dynamic_metadata_number");
        let string = lookup(c"envoy_dynamic_module_callback_http_set_dynamic_metadata_string");
        let whole = lookup(c"envoy_dynamic_module_callback_http_set_dynamic_metadata_struct");
        let state = lookup(c"envoy_dynamic_module_callback_http_set_filter_state_bytes");
        let increment = lookup(c"envoy_dynamic_module_callback_http_filter_config_increment_counter");
        let reset = lookup(c"envoy_dynamic_module_callback_http_filter_reset_stream");
        if number.is_null() || string.is_null() {
            log::warn!(
                "this Envoy has no dynamic-metadata callbacks: the request summary is not in api_agent metadata"
            );
        }
        if state.is_null() {
            log::warn!("this Envoy has no filter-state callback: the request summary is not in filter state");
        }
        // SAFETY: each non-null pointer is the Envoy function of that name, whose C signature is the
        // one declared by the type it is transmuted to (abi.h, v0.2.0).
        unsafe {
            Optional {
                metadata_number: (!number.is_null())
                    .then(|| std::mem::transmute::<*mut c_void, SetMetadataNumber>(number)),
                metadata_string: (!string.is_null())
                    .then(|| std::mem::transmute::<*mut c_void, SetMetadataString>(string)),
                metadata_struct: (!whole.is_null())
                    .then(|| std::mem::transmute::<*mut c_void, SetMetadataStruct>(whole)),
                filter_state: (!state.is_null()).then(|| std::mem::transmute::<*mut c_void, SetFilterState>(state)),
                config_increment: (!increment.is_null())
                    .then(|| std::mem::transmute::<*mut c_void, ConfigIncrement>(increment)),
                reset_stream: (!reset.is_null()).then(|| std::mem::transmute::<*mut c_void, ResetStream>(reset)),
            }
        }
    })
}

/// Resets the stream of `filter` (Envoy's filter pointer: a local reset, with `details`); false where
/// this Envoy cannot.
pub fn reset_stream(filter: *mut c_void, details: &str) -> bool {
    let Some(reset) = optional().reset_stream else {
        return false;
    };
    // SAFETY: `filter` is the live filter of the hook that runs; the details outlive the call.
    unsafe { reset(filter, RESET_LOCAL, ModuleBuffer::of(details.as_bytes())) };
    true
}

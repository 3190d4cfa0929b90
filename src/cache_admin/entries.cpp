// Listing and reading entries (moejit/cache_admin.hpp) over src/cache/cache_admin.hpp.
#include "cache_admin/convert.hpp"

namespace moejit::cache_admin {

std::vector<EntryInfo> list_entries(const std::filesystem::path& dir, Ownership ownership) {
  std::vector<EntryInfo> out;
  for (cache::EntryInfo& e : cache::list_entries(dir, internal(ownership))) {
    EntryInfo i;
    i.address = e.address;
    i.path = std::move(e.path);
    i.file_bytes = e.file_bytes;
    if (e.header) i.header = from_internal(*e.header);
    i.cubin_bytes = e.cubin_bytes;
    i.problem = std::move(e.problem);
    i.last_used_unix = e.last_used_unix;
    out.push_back(std::move(i));
  }
  return out;
}

Entry read_entry(const std::filesystem::path& dir, std::string_view id_prefix, Ownership ownership) {
  cache::Entry e = cache::read_entry(dir, id_prefix, internal(ownership));
  return Entry{e.header.payload.address(), from_internal(e.header), std::move(e.cubin)};
}

}  // namespace moejit::cache_admin

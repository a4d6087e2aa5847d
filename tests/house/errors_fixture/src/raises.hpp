// raises E-FIX-001 (documented) and E-FIX-009 (not documented)
#pragma once
inline void a() { throw error("E-FIX-001", "documented", "nothing"); }
inline void b() { throw error("E-FIX-009", "not documented", "document it"); }

// raises E-FIX-001 (documented) and E-FIX-009 (not documented); one static_assert has no code
#pragma once
inline void a() { throw error("E-FIX-001", "documented", "nothing"); }
inline void b() { throw error("E-FIX-009", "not documented", "document it"); }
template <class T> struct needs_int { static_assert(sizeof(T) == 4, "T must be an int"); };
template <class T> struct coded { static_assert(sizeof(T) == 4, "E-FIX-001: T must be an int. Fix: pass an int."); };

-- The objects of the extension pg_eventtime, each with what defines it, one line per fact, in a
-- stable order: an upgraded database and a fresh one must print the same lines.
\pset format unaligned
\pset tuples_only on
WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'pg_eventtime'),
members AS (
  SELECT d.classid, d.objid FROM pg_depend d, ext
  WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
),
funcs AS (
  SELECT format('function %s(%s) returns %s lang %s vol %s par %s strict %s secdef %s leakproof %s config %s acl %s src %s bin %s kind %s',
           p.oid::regproc, pg_get_function_arguments(p.oid), coalesce(pg_get_function_result(p.oid), ''),
           l.lanname, p.provolatile, p.proparallel, p.proisstrict, p.prosecdef, p.proleakproof, p.proconfig,
           p.proacl, CASE WHEN l.lanname = 'c' THEN p.prosrc ELSE md5(p.prosrc) END, p.probin, p.prokind) AS line
  FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
  JOIN pg_language l ON l.oid = p.prolang
),
aggs AS (
  SELECT format('aggregate %s: trans %s final %s combine %s serial %s deserial %s stype %s init %s',
           a.aggfnoid::regproc, a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggserialfn, a.aggdeserialfn,
           a.aggtranstype::regtype, a.agginitval) AS line
  FROM members m JOIN pg_aggregate a ON m.classid = 'pg_proc'::regclass AND a.aggfnoid = m.objid
),
rels AS (
  SELECT c.oid, c.relkind, format('%I.%I', n.nspname, c.relname) AS name, c.relacl, c.relrowsecurity, c.relforcerowsecurity
  FROM members m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
  JOIN pg_namespace n ON n.oid = c.relnamespace
),
rel_lines AS (
  SELECT format('relation %s kind %s acl %s rls %s %s', name, relkind, relacl, relrowsecurity, relforcerowsecurity) FROM rels
  UNION ALL
  SELECT format('column %s.%s %s notnull %s default %s identity %s generated %s acl %s', r.name, a.attname,
           format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid), a.attidentity,
           a.attgenerated, a.attacl)
  FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
  UNION ALL
  SELECT format('index %s %s', r.name, regexp_replace(pg_get_indexdef(i.indexrelid), 'INDEX \S+ ON', 'INDEX ON'))
  FROM rels r JOIN pg_index i ON i.indrelid = r.oid
  UNION ALL
  SELECT format('constraint %s %s', r.name, pg_get_constraintdef(co.oid))
  FROM rels r JOIN pg_constraint co ON co.conrelid = r.oid
  UNION ALL
  SELECT format('trigger %s %s', r.name, pg_get_triggerdef(t.oid))
  FROM rels r JOIN pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal
  UNION ALL
  SELECT format('policy %s %s cmd %s roles %s using %s check %s', r.name, po.polname, po.polcmd, po.polroles::regrole[],
           pg_get_expr(po.polqual, po.polrelid), pg_get_expr(po.polwithcheck, po.polrelid))
  FROM rels r JOIN pg_policy po ON po.polrelid = r.oid
  UNION ALL
  SELECT format('view %s %s', r.name, pg_get_viewdef(r.oid)) FROM rels r WHERE r.relkind = 'v'
  UNION ALL
  SELECT format('comment %s %s', r.name, obj_description(r.oid, 'pg_class')) FROM rels r WHERE obj_description(r.oid, 'pg_class') IS NOT NULL
),
others AS (
  SELECT format('type %s', t.oid::regtype) FROM members m JOIN pg_type t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
  UNION ALL
  SELECT format('enum %s %s', e.enumtypid::regtype, e.enumlabel) FROM members m JOIN pg_enum e ON m.classid = 'pg_type'::regclass AND e.enumtypid = m.objid
  UNION ALL
  SELECT format('schema %s acl %s', s.nspname, s.nspacl) FROM members m JOIN pg_namespace s ON m.classid = 'pg_namespace'::regclass AND s.oid = m.objid
  UNION ALL
  SELECT format('event trigger %s on %s calls %s tags %s enabled %s', e.evtname, e.evtevent, e.evtfoid::regproc, e.evttags, e.evtenabled)
  FROM members m JOIN pg_event_trigger e ON m.classid = 'pg_event_trigger'::regclass AND e.oid = m.objid
  UNION ALL
  SELECT format('cast %s as %s', c.castsource::regtype, c.casttarget::regtype) FROM members m JOIN pg_cast c ON m.classid = 'pg_cast'::regclass AND c.oid = m.objid
  UNION ALL
  SELECT format('operator %s', o.oid::regoperator) FROM members m JOIN pg_operator o ON m.classid = 'pg_operator'::regclass AND o.oid = m.objid
  UNION ALL
  SELECT format('member of class %s', m.classid::regclass) FROM members m
  WHERE m.classid NOT IN ('pg_proc'::regclass, 'pg_class'::regclass, 'pg_type'::regclass, 'pg_namespace'::regclass, 'pg_event_trigger'::regclass, 'pg_cast'::regclass, 'pg_operator'::regclass)
  UNION ALL
  SELECT format('config dump %s where %s', c::regclass, cond)
  FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(c, cond) WHERE e.extname = 'pg_eventtime'
  UNION ALL
  SELECT format('function comment %s %s', p.oid::regprocedure, obj_description(p.oid, 'pg_proc'))
  FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid WHERE obj_description(p.oid, 'pg_proc') IS NOT NULL
)
SELECT line FROM (SELECT line FROM funcs UNION ALL SELECT line FROM aggs UNION ALL SELECT * FROM rel_lines UNION ALL SELECT * FROM others) l(line)
ORDER BY line COLLATE "C";

NAME contract
OBJSENSE
    MAX
ROWS
 N obj
 L r0
 L r1
 L r2
 E r3
 E r4
 E r5
 E r6
 E r7
 L r8
 L r9
 L r10
 L r11
 L r12
 L r13
 L r14
 L r15
 L r16
 L r17
 L r18
 L r19
COLUMNS
    MARKER 'MARKER' 'INTORG'
    x0 obj 24.499999999999996
    x0 r2 2.0
    x0 r13 -16.0
    x0 r14 -16.0
    x1 obj 14.8
    x1 r7 -1.0
    x1 r17 -8.0
    x2 obj 4.866666666666665
    x2 r0 1.0
    x2 r4 -1.0
    x2 r16 -4.0
    x3 obj 7.299999999999999
    x3 r0 1.0
    x3 r6 -1.0
    x3 r17 -4.0
    x4 obj 2.5
    x4 r1 1.0
    x4 r3 -1.0
    x4 r13 -2.0
    x4 r15 -2.0
    x4 r18 -2.0
    x5 obj 2.5
    x5 r1 1.0
    x5 r5 -1.0
    x5 r19 -2.0
    x6 obj 6.300459375000001
    x6 r8 4.0
    x6 r13 -4.0
    x6 r15 -4.0
    x7 obj 12.600131250000002
    x7 r9 8.0
    x7 r13 -8.0
    x7 r15 -8.0
    x8 obj 0.05092709297839506
    x8 r10 4.0
    x9 obj 15.00015625
    x9 r17 -8.0
    x10 r2 -1.0
    x10 r8 8.0
    x11 r2 -1.0
    x11 r9 8.0
    x12 r2 -1.0
    x12 r10 8.0
    x13 r2 -1.0
    x13 r11 8.0
    x14 r3 1.0
    x14 r8 2.0
    x15 r4 1.0
    x15 r8 4.0
    x16 r3 1.0
    x16 r9 2.0
    x17 r4 1.0
    x17 r9 4.0
    x18 r3 1.0
    x18 r10 2.0
    x19 r4 1.0
    x19 r10 4.0
    x20 r3 1.0
    x20 r11 2.0
    x21 r4 1.0
    x21 r11 4.0
    x22 r5 1.0
    x22 r12 2.0
    x23 r6 1.0
    x23 r12 4.0
    x24 r7 1.0
    x24 r12 8.0
    x25 obj 391.06790799561884
    x25 r13 1.0
    x26 obj 15.0
    x26 r13 1.0
    x27 obj 391.8072289156626
    x27 r14 1.0
    x28 obj 7.5
    x28 r14 1.0
    x29 obj 390.7831325301205
    x29 r15 1.0
    x30 obj 7.5
    x30 r15 1.0
    x31 obj 391.67814113597245
    x31 r16 1.0
    x32 obj 391.67814113597245
    x32 r17 1.0
    x33 obj 15.0
    x33 r17 1.0
    x34 obj 3.75
    x34 r18 1.0
    x35 obj 3.75
    x35 r19 1.0
    MARKER 'MARKER' 'INTEND'
RHS
    rhs r0 1.0
    rhs r1 1.0
    rhs r8 8.0
    rhs r9 8.0
    rhs r10 8.0
    rhs r11 8.0
    rhs r12 8.0
BOUNDS
 UP bnd x0 1.0
 UP bnd x1 1.0
 UP bnd x2 1.0
 UP bnd x3 1.0
 UP bnd x4 1.0
 UP bnd x5 1.0
 FX bnd x6 1.0
 UP bnd x7 1.0
 UP bnd x8 1.0
 FX bnd x9 0.0
 UP bnd x10 1.0
 UP bnd x11 1.0
 UP bnd x12 1.0
 UP bnd x13 1.0
 UP bnd x14 4.0
 UP bnd x15 2.0
 UP bnd x16 4.0
 UP bnd x17 2.0
 UP bnd x18 4.0
 UP bnd x19 2.0
 UP bnd x20 4.0
 UP bnd x21 2.0
 UP bnd x22 4.0
 UP bnd x23 2.0
 UP bnd x24 1.0
 UP bnd x25 21.0
 UP bnd x26 8.0
 UP bnd x27 10.0
 UP bnd x28 6.0
 UP bnd x29 10.0
 UP bnd x30 3.0
 UP bnd x31 3.0
 UP bnd x32 2.0
 UP bnd x33 6.0
 UP bnd x34 3.0
 UP bnd x35 1.0
ENDATA

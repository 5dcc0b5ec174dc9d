NAME contract
OBJSENSE
    MAX
ROWS
 N obj
 L r0
 L r1
 L r2
 L r3
 L r4
 E r5
 E r6
 E r7
 E r8
 E r9
 E r10
 L r11
 L r12
 L r13
 L r14
 L r15
 L r16
 L r17
 L r18
 L r19
 L r20
 L r21
 L r22
COLUMNS
    MARKER 'MARKER' 'INTORG'
    x0 obj 24.499999999999996
    x0 r4 2.0
    x0 r16 -16.0
    x0 r17 -16.0
    x1 obj 14.8
    x1 r10 -1.0
    x1 r20 -8.0
    x2 obj 4.866666666666665
    x2 r2 1.0
    x2 r6 -1.0
    x2 r19 -4.0
    x3 obj 7.299999999999999
    x3 r2 1.0
    x3 r9 -1.0
    x3 r20 -4.0
    x4 obj 2.5
    x4 r3 1.0
    x4 r5 -1.0
    x4 r16 -2.0
    x4 r18 -2.0
    x4 r21 -2.0
    x5 obj 2.5
    x5 r3 1.0
    x5 r8 -1.0
    x5 r22 -2.0
    x6 obj 0.00012600000000000003
    x6 r0 1.0
    x6 r10 -1.0
    x7 obj 0.00015000000000000001
    x7 r1 1.0
    x7 r7 -1.0
    x8 obj 6.300459375000001
    x8 r11 4.0
    x8 r16 -4.0
    x8 r18 -4.0
    x9 obj 12.600131250000002
    x9 r0 1.0
    x9 r12 8.0
    x9 r16 -8.0
    x9 r18 -8.0
    x10 obj 0.05092709297839506
    x10 r13 4.0
    x11 obj 15.00015625
    x11 r1 1.0
    x11 r20 -8.0
    x12 r4 -1.0
    x12 r11 8.0
    x13 r4 -1.0
    x13 r12 8.0
    x14 r4 -1.0
    x14 r13 8.0
    x15 r4 -1.0
    x15 r14 8.0
    x16 r5 1.0
    x16 r11 2.0
    x17 r6 1.0
    x17 r11 4.0
    x18 r7 1.0
    x18 r11 8.0
    x19 r5 1.0
    x19 r12 2.0
    x20 r6 1.0
    x20 r12 4.0
    x21 r7 1.0
    x21 r12 8.0
    x22 r5 1.0
    x22 r13 2.0
    x23 r6 1.0
    x23 r13 4.0
    x24 r7 1.0
    x24 r13 8.0
    x25 r5 1.0
    x25 r14 2.0
    x26 r6 1.0
    x26 r14 4.0
    x27 r7 1.0
    x27 r14 8.0
    x28 r8 1.0
    x28 r15 2.0
    x29 r9 1.0
    x29 r15 4.0
    x30 r10 1.0
    x30 r15 8.0
    x31 obj 391.06790799561884
    x31 r16 1.0
    x32 obj 15.0
    x32 r16 1.0
    x33 obj 391.8072289156626
    x33 r17 1.0
    x34 obj 7.5
    x34 r17 1.0
    x35 obj 390.7831325301205
    x35 r18 1.0
    x36 obj 7.5
    x36 r18 1.0
    x37 obj 391.67814113597245
    x37 r19 1.0
    x38 obj 391.67814113597245
    x38 r20 1.0
    x39 obj 15.0
    x39 r20 1.0
    x40 obj 3.75
    x40 r21 1.0
    x41 obj 3.75
    x41 r22 1.0
    MARKER 'MARKER' 'INTEND'
RHS
    rhs r0 1.0
    rhs r1 1.0
    rhs r2 1.0
    rhs r3 1.0
    rhs r11 8.0
    rhs r12 8.0
    rhs r13 8.0
    rhs r14 8.0
    rhs r15 8.0
BOUNDS
 UP bnd x0 1.0
 UP bnd x1 1.0
 UP bnd x2 1.0
 UP bnd x3 1.0
 UP bnd x4 1.0
 UP bnd x5 1.0
 UP bnd x6 1.0
 UP bnd x7 1.0
 FX bnd x8 1.0
 UP bnd x9 1.0
 UP bnd x10 1.0
 FX bnd x11 0.0
 UP bnd x12 1.0
 UP bnd x13 1.0
 UP bnd x14 1.0
 UP bnd x15 1.0
 UP bnd x16 4.0
 UP bnd x17 2.0
 UP bnd x18 1.0
 UP bnd x19 4.0
 UP bnd x20 2.0
 UP bnd x21 1.0
 UP bnd x22 4.0
 UP bnd x23 2.0
 UP bnd x24 1.0
 UP bnd x25 4.0
 UP bnd x26 2.0
 UP bnd x27 1.0
 UP bnd x28 4.0
 UP bnd x29 2.0
 UP bnd x30 1.0
 UP bnd x31 21.0
 UP bnd x32 8.0
 UP bnd x33 10.0
 UP bnd x34 6.0
 UP bnd x35 10.0
 UP bnd x36 3.0
 UP bnd x37 3.0
 UP bnd x38 2.0
 UP bnd x39 6.0
 UP bnd x40 3.0
 UP bnd x41 1.0
ENDATA

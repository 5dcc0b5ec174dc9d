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
 L r23
COLUMNS
    MARKER 'MARKER' 'INTORG'
    x0 obj 15.0
    x0 r1 1.0
    x0 r7 -1.0
    x0 r19 -8.0
    x0 r23 -1.0
    x1 obj 15.0
    x1 r1 1.0
    x1 r10 -1.0
    x1 r20 -8.0
    x1 r23 -1.0
    x2 obj 24.499999999999996
    x2 r4 2.0
    x2 r16 -16.0
    x2 r17 -16.0
    x3 obj 14.8
    x3 r10 -1.0
    x3 r20 -8.0
    x3 r23 1.0
    x4 obj 4.866666666666665
    x4 r2 1.0
    x4 r6 -1.0
    x4 r19 -4.0
    x5 obj 7.299999999999999
    x5 r2 1.0
    x5 r9 -1.0
    x5 r20 -4.0
    x6 obj 2.5
    x6 r3 1.0
    x6 r5 -1.0
    x6 r16 -2.0
    x6 r18 -2.0
    x6 r21 -2.0
    x7 obj 2.5
    x7 r3 1.0
    x7 r8 -1.0
    x7 r22 -2.0
    x8 obj 0.00012600000000000003
    x8 r0 1.0
    x8 r10 -1.0
    x9 obj 12.600000000000001
    x9 r0 1.0
    x9 r7 -1.0
    x10 obj 6.300459375000001
    x10 r11 4.0
    x10 r16 -4.0
    x10 r18 -4.0
    x11 obj 12.600131250000002
    x11 r0 1.0
    x11 r12 8.0
    x11 r16 -8.0
    x11 r18 -8.0
    x12 obj 0.05092709297839506
    x12 r13 4.0
    x13 obj 15.00015625
    x13 r1 1.0
    x13 r20 -8.0
    x14 r4 -1.0
    x14 r11 8.0
    x15 r4 -1.0
    x15 r12 8.0
    x16 r4 -1.0
    x16 r13 8.0
    x17 r4 -1.0
    x17 r14 8.0
    x18 r5 1.0
    x18 r11 2.0
    x19 r6 1.0
    x19 r11 4.0
    x20 r7 1.0
    x20 r11 8.0
    x21 r5 1.0
    x21 r12 2.0
    x22 r6 1.0
    x22 r12 4.0
    x23 r7 1.0
    x23 r12 8.0
    x24 r5 1.0
    x24 r13 2.0
    x25 r6 1.0
    x25 r13 4.0
    x26 r7 1.0
    x26 r13 8.0
    x27 r5 1.0
    x27 r14 2.0
    x28 r6 1.0
    x28 r14 4.0
    x29 r7 1.0
    x29 r14 8.0
    x30 r8 1.0
    x30 r15 2.0
    x31 r9 1.0
    x31 r15 4.0
    x32 r10 1.0
    x32 r15 8.0
    x33 obj 587.9367469879519
    x33 r16 1.0
    x34 obj 15.0
    x34 r16 1.0
    x35 obj 587.3493975903615
    x35 r17 1.0
    x36 obj 7.5
    x36 r17 1.0
    x37 obj 391.17469879518075
    x37 r18 1.0
    x38 obj 1569.397590361446
    x38 r19 1.0
    x39 obj 1569.397590361446
    x39 r20 1.0
    x40 obj 22.5
    x40 r20 1.0
    x41 obj 3.75
    x41 r21 1.0
    x42 obj 3.75
    x42 r22 1.0
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
 UP bnd x8 1.0
 UP bnd x9 1.0
 FX bnd x10 1.0
 UP bnd x11 1.0
 UP bnd x12 1.0
 FX bnd x13 0.0
 UP bnd x14 1.0
 UP bnd x15 1.0
 UP bnd x16 1.0
 UP bnd x17 1.0
 UP bnd x18 4.0
 UP bnd x19 2.0
 UP bnd x20 1.0
 UP bnd x21 4.0
 UP bnd x22 2.0
 UP bnd x23 1.0
 UP bnd x24 4.0
 UP bnd x25 2.0
 UP bnd x26 1.0
 UP bnd x27 4.0
 UP bnd x28 2.0
 UP bnd x29 1.0
 UP bnd x30 4.0
 UP bnd x31 2.0
 UP bnd x32 1.0
 UP bnd x33 21.0
 UP bnd x34 2.0
 UP bnd x35 10.0
 UP bnd x36 3.0
 UP bnd x37 10.0
 UP bnd x38 9.0
 UP bnd x39 2.0
 UP bnd x40 5.0
 UP bnd x41 3.0
 UP bnd x42 1.0
ENDATA
